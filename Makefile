# gangsched — PGXS build. The one version number lives in gangsched.control.
EXTENSION  = gangsched
EXTVERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)

MODULE_big = gangsched
OBJS = $(patsubst %.c,%.o,$(wildcard src/*.c))
# The install script of the current version is assembled from sql/src/*.sql
# (one file per concern, in name order); released upgrade scripts are
# committed under sql/ as they are.
#
# While a version is in development its upgrade script from the previous
# release is assembled too: the hand-written changes in sql/upgrade/ followed
# by the sections every install ends with (config dump, privileges,
# search_path), which are idempotent and so re-applied to whatever the
# changes created or replaced. At release both built files are committed
# under sql/ and frozen (docs/upgrade.md).
INSTALL_SQL = sql/$(EXTENSION)--$(EXTVERSION).sql
PREV_VERSION = 0.1
UPGRADE_SQL = sql/$(EXTENSION)--$(PREV_VERSION)--$(EXTVERSION).sql
DATA_built = $(INSTALL_SQL) $(UPGRADE_SQL)
DATA = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql))
# the released versions' own control files (their requirements as released)
DATA += $(wildcard sql/$(EXTENSION)--*.control)


# -Wno-unused-parameter: PG_FUNCTION_ARGS and hooks carry parameters we may ignore,
# as PostgreSQL itself builds.
PG_CPPFLAGS = -DGS_EXTVERSION='"$(EXTVERSION)"'
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers \
            -Wno-sign-compare -Wno-cast-function-type

# Suites. REGRESS/ISOLATION run from test/ (so the top-level sql/ of install
# scripts is not taken for test input); TAP tests under test/t.
TESTS       = $(sort $(wildcard test/sql/*.sql))
REGRESS     = $(patsubst test/sql/%.sql,%,$(TESTS))
REGRESS_OPTS = --inputdir=test --outputdir=test --use-existing
ISO_SPECS   = $(sort $(wildcard test/specs/*.spec))
ISOLATION   = $(patsubst test/specs/%.spec,%,$(ISO_SPECS))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso --use-existing
TAP_TESTS   = 1
PROVE_TESTS = test/t/*.pl
EXTRA_CLEAN = test/results test/regression.diffs test/regression.out test/output_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
ISOLATION_TESTDB = $(CONTRIB_TESTDB)

# Every object depends on every header (PGXS tracks none): struct layouts
# must never differ between objects.
$(OBJS): $(wildcard src/*.h)

$(INSTALL_SQL): $(sort $(wildcard sql/src/*.sql))
	cat $^ > $@

$(UPGRADE_SQL): sql/upgrade/$(EXTENSION)--$(PREV_VERSION)--$(EXTVERSION).sql sql/src/97_dump.sql sql/src/98_privileges.sql sql/src/99_search_path.sql
	cat $^ > $@

# The version must agree everywhere; CI calls this. One version, the control
# file's, which is a semantic version (major.minor.patch) as PGXN requires:
# META.json (the distribution and what it provides) and debian/changelog
# carry it unchanged; tools/pgxn-meta-check validates META.json against the
# PGXN Meta Spec 1.0.0.
DISTVERSION = $(EXTVERSION)
.PHONY: check-version pgtap bench demo test dist
check-version:
	@perl tools/pgxn-meta-check --version $(DISTVERSION) META.json >/dev/null || { perl tools/pgxn-meta-check --version $(DISTVERSION) META.json; exit 1; }
	@grep -q '"file": *"$(INSTALL_SQL)"' META.json || { echo "META.json does not name $(INSTALL_SQL)"; exit 1; }
	@grep -q '^gangsched ($(DISTVERSION))' debian/changelog || { echo "debian/changelog's latest entry is not $(DISTVERSION)"; exit 1; }
	@echo "version $(EXTVERSION) consistent (gangsched.control, META.json, debian/changelog)"

# The PGXN distribution (docs/install.md): gangsched-$(DISTVERSION).zip with
# everything under gangsched-$(DISTVERSION)/, made by git archive from the
# committed HEAD (uncommitted changes are not in it; .gitattributes leaves
# out what is not the extension's) plus the two assembled install scripts,
# so that the file META.json's provides names is in the archive.
DIST = $(EXTENSION)-$(DISTVERSION)
# (once a release commits them, git archive has them already)
DIST_ADD = $(foreach f,$(INSTALL_SQL) $(UPGRADE_SQL),$(if $(shell git ls-files -- $(f) 2>/dev/null),,--add-file=$(f)))
dist: $(INSTALL_SQL) $(UPGRADE_SQL)
	@git rev-parse --verify -q HEAD >/dev/null || { echo "make dist needs a git checkout with a commit"; exit 1; }
	@git diff --quiet HEAD -- || echo "make dist: uncommitted changes are not in $(DIST).zip (it is made from HEAD)"
	perl tools/pgxn-meta-check --version $(DISTVERSION) META.json
	rm -f $(DIST).zip
	git archive --format=zip --prefix=$(DIST)/sql/ $(DIST_ADD) --prefix=$(DIST)/ -o $(DIST).zip HEAD
	@echo "$(DIST).zip made from $$(git rev-parse --short HEAD)"

pgtap:
	pg_prove --failures test/pgtap/*.sql

# One command for every suite on a throwaway cluster (also what .ci/run calls).
test:
	bash tools/gs test

demo:
	bash tools/gs demo

# Benchmarks (bench/README.md). With PGHOST set: against that server (the
# extension installed there; the bench creates and drops its own databases).
# Otherwise on a throwaway cluster from tools/gs, which must run as root.
# Options go through BENCH_ARGS, e.g. make bench BENCH_ARGS=--quick
bench:
	@if [ -n "$$PGHOST" ]; then bash bench/run.sh $(BENCH_ARGS); else bash tools/gs bench $(BENCH_ARGS); fi

# The three PGXS suites one at a time, so tools/gs can count each.
.PHONY: installcheck-regress installcheck-isolation installcheck-tap
installcheck-regress: submake $(REGRESS_PREP)
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
installcheck-isolation: submake $(REGRESS_PREP)
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
installcheck-tap:
	$(prove_installcheck)

# The reference node agent (tools/agent, docs/agent.md): a plain libpq
# program, built with the module and installed into PostgreSQL's bindir.
# Explicit rules: PGXS's PROGRAM cannot share a Makefile with MODULE_big.
# COPT (extra compiler flags, as PGXS takes them), TOOLS_CPPFLAGS and
# TOOLS_LDFLAGS reach the agent and the replay tool too: debian/rules passes
# Debian's hardening flags through them (PGXS's own CPPFLAGS and LDFLAGS are
# the server's).
AGENT = tools/agent/gangsched-agent
AGENT_SRCS = $(sort $(wildcard tools/agent/*.c))
AGENT_CFLAGS = -O2 -g -std=gnu11 -Wall -Wextra -Werror -DGS_VERSION='"$(EXTVERSION)"' \
               -I$(shell $(PG_CONFIG) --includedir)
AGENT_LIBS = -L$(shell $(PG_CONFIG) --libdir) -lpq

all: $(AGENT)
$(AGENT): $(AGENT_SRCS) $(wildcard tools/agent/*.h) $(EXTENSION).control
	$(CC) $(AGENT_CFLAGS) $(COPT) $(TOOLS_CPPFLAGS) -o $@ $(AGENT_SRCS) $(AGENT_LIBS) $(TOOLS_LDFLAGS)

.PHONY: install-agent uninstall-agent clean-agent
install: install-agent
install-agent: $(AGENT)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(AGENT) '$(DESTDIR)$(bindir)/gangsched-agent'
uninstall: uninstall-agent
uninstall-agent:
	rm -f '$(DESTDIR)$(bindir)/gangsched-agent'
clean: clean-agent
clean-agent:
	rm -f $(AGENT)

# The command-line client (tools/cli, docs/cli.md): a bash script over psql,
# its version filled in from gangsched.control, installed into bindir.
CLI = tools/cli/gangsched
all: $(CLI)
$(CLI): tools/cli/gangsched.in $(EXTENSION).control
	sed 's/@GS_VERSION@/$(EXTVERSION)/' $< > $@ && chmod +x $@

.PHONY: install-cli uninstall-cli clean-cli
install: install-cli
install-cli: $(CLI)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_SCRIPT) $(CLI) '$(DESTDIR)$(bindir)/gangsched'
uninstall: uninstall-cli
uninstall-cli:
	rm -f '$(DESTDIR)$(bindir)/gangsched'
clean: clean-cli
clean-cli:
	rm -f $(CLI)

# TAP output test by test ("ok N - ..."), from which tools/gs counts the
# TAP tests (a plain prove prints one line per file).
PROVE_FLAGS = --verbose

# The trace replay (tools/replay, docs/replay.md): gangsched-replay, a plain
# libpq program built with the module and installed into PostgreSQL's
# bindir. Explicit rules: PGXS's PROGRAM would clash with MODULE_big's OBJS.
REPLAY = tools/replay/gangsched-replay
REPLAY_SRCS = $(sort $(wildcard tools/replay/*.c))
REPLAY_CFLAGS = -O2 -g -std=gnu11 -Wall -Wextra -Werror -DGS_VERSION='"$(EXTVERSION)"' \
                -I$(shell $(PG_CONFIG) --includedir)
REPLAY_LIBS = -L$(shell $(PG_CONFIG) --libdir) -lpq -lm

all: $(REPLAY)
$(REPLAY): $(REPLAY_SRCS) $(wildcard tools/replay/*.h) $(EXTENSION).control
	$(CC) $(REPLAY_CFLAGS) $(COPT) $(TOOLS_CPPFLAGS) -o $@ $(REPLAY_SRCS) $(REPLAY_LIBS) $(TOOLS_LDFLAGS)

.PHONY: install-replay uninstall-replay clean-replay replay
install: install-replay
install-replay: $(REPLAY)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(REPLAY) '$(DESTDIR)$(bindir)/gangsched-replay'
uninstall: uninstall-replay
uninstall-replay:
	rm -f '$(DESTDIR)$(bindir)/gangsched-replay'
clean: clean-replay
clean-replay:
	rm -f $(REPLAY)

# docs/replay.md's table and plot against the server named by PGHOST/PGPORT/
# PGUSER (options through REPLAY_ARGS, e.g. make replay REPLAY_ARGS=--quick).
replay:
	bash bench/replay.sh $(REPLAY_ARGS)
