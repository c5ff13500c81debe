# Packaging (issue 18, docs/install.md): the PGXN archive and the Debian
# package, built from a copy of this tree and checked without touching the
# machine's PostgreSQL installation.
#
# - make dist (in a git copy of the tree, as it is now) makes
#   gangsched-<version>.zip with everything under gangsched-<version>/:
#   what a PGXS build needs, the two assembled install scripts, nothing built
#   or private; its META.json is valid against the PGXN Meta Spec 1.0.0
#   (tools/pgxn-meta-check, which also rejects a broken one);
# - the unpacked archive builds and installs (make; make install DESTDIR=)
#   with pg_config, the way pgxn install and a user do;
# - dpkg-buildpackage -us -uc -b in the unpacked archive builds
#   postgresql-15-gangsched (pg_buildext), whose fields and files are
#   checked: the same files as the archive's make install, plus
#   /usr/bin links, manual pages, the copyright and the docs; lintian (when
#   installed) reports no error;
# - the package is extracted (dpkg-deb -x) into a private copy of
#   PostgreSQL 15, where a server preloads the packaged library, CREATE
#   EXTENSION runs the packaged scripts, the packaged CLI submits a job, a
#   round places it and check_invariants() finds nothing; the packaged agent
#   and replay tool run.
#
# The Debian part is skipped without dpkg-buildpackage, debhelper and
# postgresql-server-dev-all (tools/gs test installs them when apt can), or
# with GS_TEST_DEB=0 (it takes about a minute on an idle 2-core machine).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd qw(abs_path);
use File::Path qw(make_path remove_tree);
use File::Find;
use IPC::Run;
use Time::HiRes qw(time);

sub which { my ($p) = @_; for (split /:/, $ENV{PATH}) { return "$_/$p" if -x "$_/$p"; } return undef; }

for my $prog (qw(git unzip perl make))
{
	plan skip_all => "$prog is not installed" unless which($prog);
}

my $src = abs_path($ENV{TESTDIR} // '.');
my $pg_config = $ENV{PG_CONFIG} && $ENV{PG_CONFIG} =~ m{/} ? $ENV{PG_CONFIG} : which('pg_config');
my $tmp = PostgreSQL::Test::Utils::tempdir('pkg');
# git, dpkg-buildpackage and lintian read the caller's configuration: none
# here (HOME may be root's, which postgres cannot read).
$ENV{HOME} = $tmp;
$ENV{GIT_CONFIG_NOSYSTEM} = '1';

# Run a command in a directory; returns (exit status, stdout and stderr).
sub run_in
{
	my ($dir, @cmd) = @_;
	my $out = '';
	IPC::Run::run(\@cmd, '<', \undef, '>&', \$out, init => sub { chdir $dir or die "chdir $dir: $!" });
	return ($? >> 8, $out);
}

sub pg_config { my ($rc, $out) = run_in('/', $pg_config, "--$_[0]"); chomp $out; return $out; }
my ($bindir, $pkglibdir, $sharedir) = map { pg_config($_) } qw(bindir pkglibdir sharedir);

# The version, as the control file and PGXN spell it.
open(my $ctl, '<', "$src/gangsched.control") or die $!;
my ($extversion) = map { /^default_version\s*=\s*'([^']+)'/ ? $1 : () } <$ctl>;
close $ctl;
my $dv = $extversion;	# one version: the control file's, semantic as PGXN requires
my $dist = "gangsched-$dv";

# ---- make dist ------------------------------------------------------------
# A copy of the tree as it is (uncommitted changes included), made a git
# repository of its own: make dist archives HEAD.
my $tree = "$tmp/tree";
make_path($tree);
my ($rc, $out) = run_in('/', 'sh', '-c',
	qq{tar -C '$src' --exclude=./.git --exclude=tmp_check --exclude=log --exclude='$dist.zip' -cf - . | tar -C '$tree' -xf -});
is($rc, 0, 'a copy of the tree') or diag $out;
($rc, $out) = run_in($tree, 'sh', '-c',
	'git init -q && git add -A && git -c user.name=gangsched -c user.email=gangsched@packages.invalid '
	  . 'commit -q -m "packaging test"');
is($rc, 0, 'committed in a repository of its own') or diag $out;
my @tracked = split /\n/, (run_in($tree, 'git', 'ls-files'))[1];

($rc, $out) = run_in($tree, 'make', '-s', 'dist', "PG_CONFIG=$pg_config");
is($rc, 0, 'make dist') or diag $out;
like($out, qr/META\.json valid/, 'make dist validates META.json');
my $zip = "$tree/$dist.zip";
ok(-f $zip, "it made $dist.zip");

my @entries = split /\n/, (run_in($tree, 'unzip', '-Z1', $zip))[1];
my @files = grep { !m{/$} } @entries;
is_deeply([ grep { !m{^\Q$dist\E/} } @entries ], [], "every entry is under $dist/");
my %in = map { s{^\Q$dist\E/}{}r => 1 } @files;
my @needed = ('Makefile', 'gangsched.control', 'META.json', 'LICENSE', 'README.md',
	'sql/gangsched--0.1.sql', "sql/gangsched--$extversion.sql", "sql/gangsched--0.1--$extversion.sql",
	'tools/cli/gangsched.in', 'tools/pgxn-meta-check', 'debian/control', 'debian/control.in',
	'debian/rules', 'debian/changelog', 'debian/copyright', 'debian/pgversions', 'debian/source/format',
	grep { m{^(src/|sql/src/|sql/upgrade/|tools/agent/|tools/replay/)} } @tracked);
is_deeply([ grep { !$in{$_} } @needed ], [], 'it holds what a PGXS build and the Debian package need '
	  . '(' . scalar(@needed) . ' files)');
is_deeply([ grep { m{(\.o|\.so|\.bc|\.zip)$|^\.ci/|^\.git|tmp_check|^tools/cli/gangsched$|/gangsched-(agent|replay)$} } keys %in ],
	[], 'and nothing built, nothing of CI or git');
my @untracked = grep { !$in{$_} } @tracked;
is_deeply(\@untracked, [ grep { m{^\.ci/|^\.git} } @tracked ], 'every tracked file but CI\'s and git\'s is in it');

# ---- the unpacked archive: META.json, make, make install ----------------
my $unpacked = "$tmp/unpacked";
make_path($unpacked);
($rc, $out) = run_in($unpacked, 'unzip', '-q', $zip);
is($rc, 0, 'unzip') or diag $out;
my $top = "$unpacked/$dist";
($rc, $out) = run_in($top, 'perl', 'tools/pgxn-meta-check', '--version', $dv, '--dist', $top, 'META.json');
is($rc, 0, "META.json is valid against the PGXN Meta Spec 1.0.0, version $dv, provides' files present") or diag $out;

# The validator can fail: a two-part version is not semantic, and an
# unknown license is refused.
open(my $m, '<', "$top/META.json") or die $!;
my $meta = do { local $/; <$m> };
close $m;
(my $two = $dv) =~ s/\.\d+$//;
(my $bad = $meta) =~ s/"version": "\Q$dv\E"/"version": "$two"/g;
$bad =~ s/"license": "postgresql"/"license": "pg"/;
open($m, '>', "$tmp/bad-META.json") or die $!;
print $m $bad;
close $m;
($rc, $out) = run_in($top, 'perl', 'tools/pgxn-meta-check', "$tmp/bad-META.json");
is($rc, 1, 'the validator rejects a META.json with a two-part version and an unknown license');
like($out, qr/version must be a semantic version.*\n.*license 'pg'/s, 'and says why') or diag $out;

($rc, $out) = run_in($top, 'make', '-s', '-j2', "PG_CONFIG=$pg_config");
is($rc, 0, 'the unpacked archive builds with pg_config (make)') or diag $out;
my $pgxn_root = "$tmp/pgxn-root";
($rc, $out) = run_in($top, 'make', '-s', 'install', "DESTDIR=$pgxn_root", "PG_CONFIG=$pg_config");
is($rc, 0, 'and installs (make install DESTDIR=...)') or diag $out;

# Files (not directories) under a root, relative to it.
sub files_under
{
	my ($root) = @_;
	my @f;
	find({ no_chdir => 1, wanted => sub { push @f, substr($_, length($root)) if -f $_ || -l $_; } }, $root);
	return sort @f;
}
my @installed = files_under($pgxn_root);
my @expect_installed = ("$pkglibdir/gangsched.so", "$sharedir/extension/gangsched.control",
	"$sharedir/extension/gangsched--0.1.sql", "$sharedir/extension/gangsched--$extversion.sql",
	"$sharedir/extension/gangsched--0.1--$extversion.sql",
	map { "$bindir/$_" } qw(gangsched gangsched-agent gangsched-replay));
my %inst = map { $_ => 1 } @installed;
is_deeply([ grep { !$inst{$_} } @expect_installed ], [],
	'make install installed the library, the control file, the three scripts, the CLI, the agent and the replay tool');

# ---- the Debian package ---------------------------------------------------
SKIP:
{
	my @missing = grep { !which($_) } qw(dpkg-buildpackage dh pg_buildext dpkg-deb);
	push @missing, 'postgresql-server-dev-all (the pgxs_loop sequence)'
	  unless -f '/usr/share/perl5/Debian/Debhelper/Sequence/pgxs_loop.pm';
	skip "no @missing (apt-get install debhelper postgresql-server-dev-all; tools/gs test does it when apt can)", 1
	  if @missing;
	skip 'GS_TEST_DEB=0: the Debian package is not built', 1 if ($ENV{GS_TEST_DEB} // '1') eq '0';

	my $debdir = "$tmp/deb";
	make_path($debdir);
	($rc, $out) = run_in($debdir, 'unzip', '-q', $zip);
	is($rc, 0, 'a fresh unpacked archive for the package build');
	my $t0 = time;
	($rc, $out) = run_in("$debdir/$dist", 'dpkg-buildpackage', '-us', '-uc', '-b');
	my $secs = time - $t0;
	is($rc, 0, 'dpkg-buildpackage -us -uc -b builds in the unpacked archive') or diag substr($out, -4000);
	note(sprintf('dpkg-buildpackage took %.1f s', $secs));
	my ($arch) = (run_in('/', 'dpkg', '--print-architecture'))[1] =~ /(\S+)/;
	my $deb = "$debdir/postgresql-15-gangsched_${dv}_$arch.deb";
	ok(-f $deb, "it made postgresql-15-gangsched_${dv}_$arch.deb") or skip 'no package', 1;
	note(sprintf('package size %d bytes', -s $deb));

	my %field = map { $_ => (run_in('/', 'dpkg-deb', '-f', $deb, $_))[1] =~ s/\s+$//r } qw(Package Version Depends);
	is($field{Package}, 'postgresql-15-gangsched', 'Package: postgresql-15-gangsched');
	is($field{Version}, $dv, "Version: $dv (the control file's, as debian/changelog says it)");
	like($field{Depends}, qr/(^|, )postgresql-15( |,|$)/, 'it depends on postgresql-15 (pg_buildext)');
	like($field{Depends}, qr/libpq5/, 'and on libpq5 (the agent and the replay tool, shlibdeps)');
	like($field{Depends}, qr/postgresql-client-15/, 'and on postgresql-client-15 (the CLI runs psql)');

	# Its files: what the archive's make install installs, plus the links,
	# the docs and the copyright.
	my $root = "$tmp/root";
	my $pgroot = "$root" . ($bindir =~ s{/bin$}{}r);
	make_path("$root/usr/lib/postgresql", "$root/usr/share/postgresql", "$tmp/debfiles");
	($rc, $out) = run_in('/', 'dpkg-deb', '-x', $deb, "$tmp/debfiles");
	is($rc, 0, 'dpkg-deb -x') or diag $out;
	my @debfiles = files_under("$tmp/debfiles");
	is_deeply([ grep { !m{^/usr/share/doc/|^/usr/share/man/|^/usr/bin/} } @debfiles ], \@installed,
		'the package holds the files make install installs (' . scalar(@installed) . ')');
	my %debf = map { $_ => 1 } @debfiles;
	is_deeply([ grep { !$debf{$_} } '/usr/share/doc/postgresql-15-gangsched/copyright',
		'/usr/share/doc/postgresql-15-gangsched/examples/queries.yaml',
		map { ("/usr/bin/$_", "/usr/share/man/man1/$_.1.gz") } qw(gangsched gangsched-agent gangsched-replay) ], [],
		'and the copyright, the exporter queries, /usr/bin links to the three programs and their manual pages');
	is(readlink("$tmp/debfiles/usr/bin/gangsched"), '../lib/postgresql/15/bin/gangsched', 'the links are relative');

	if (which('lintian'))
	{
		my ($changes) = glob("$debdir/*.changes");
		($rc, $out) = run_in($debdir, 'lintian', '--fail-on', 'error', $changes);
		is($rc, 0, 'lintian finds no error') or diag $out;
		note("lintian: $_") for split /\n/, $out;
	}

	# A private copy of PostgreSQL 15 (relocatable: its pg_config, initdb and
	# postgres find share/ and lib/ next to bin/), without any gangsched of
	# the machine's, with the package extracted into it.
	($rc, $out) = run_in('/', 'cp', '-a', $bindir =~ s{/bin$}{}r, "$root/usr/lib/postgresql/");
	is($rc, 0, 'a private copy of PostgreSQL 15 (lib)') or diag $out;
	($rc, $out) = run_in('/', 'cp', '-a', $sharedir, "$root/usr/share/postgresql/");
	is($rc, 0, 'and of its share directory') or diag $out;
	remove_tree(glob("$root$pkglibdir/gangsched.so $root$pkglibdir/bitcode/gangsched* $root$sharedir/extension/gangsched*"
		. " $root$bindir/gangsched*"));
	($rc, $out) = run_in('/', 'dpkg-deb', '-x', $deb, $root);
	is($rc, 0, 'the package extracted into it') or diag $out;
	is((run_in('/', "$pgroot/bin/pg_config", '--sharedir'))[1] =~ s/\s+$//r, "$root$sharedir",
		"the copy is relocated (its pg_config's sharedir is inside it)");

	my $node = PostgreSQL::Test::Cluster->new('pkg', install_path => $pgroot);
	$node->init;
	$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = off
gangsched.min_runtime = 0
});
	$node->start;
	my $sql = sub { return $node->safe_psql('postgres', $_[0]); };
	open(my $pidf, '<', $node->data_dir . '/postmaster.pid') or die $!;
	my $pm = <$pidf>;
	chomp $pm;
	close $pidf;
	open(my $maps, '<', "/proc/$pm/maps") or die $!;
	my @libs = grep { m{/gangsched\.so$} } map { (split ' ', $_)[5] // '' } <$maps>;
	close $maps;
	is_deeply([ sort { $a cmp $b } keys %{ { map { $_ => 1 } @libs } } ], [ "$root$pkglibdir/gangsched.so" ],
		'the server preloaded the packaged library');
	$sql->(q{
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
CREATE ROLE pkg_portal LOGIN;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision');
SELECT gangsched.set_quota('vision', 'gpu', 8);
SELECT gangsched.add_member('pkg_portal', 'vision');
});
	is($sql->(q{SELECT extversion FROM pg_extension WHERE extname = 'gangsched'}), $extversion,
		"CREATE EXTENSION from the packaged scripts: version $extversion");

	my $cli = "$root/usr/bin/gangsched";
	my @env = ('PGHOST=' . $node->host, 'PGPORT=' . $node->port, 'PGDATABASE=postgres', 'PGUSER=pkg_portal',
		"PATH=$pgroot/bin:$ENV{PATH}");
	($rc, $out) = run_in('/', 'env', @env, $cli, 'version');
	is($rc, 0, 'the packaged CLI (through /usr/bin/gangsched) connects') or diag $out;
	is($out, "gangsched (client) $extversion\ngangsched (server) $extversion\n", 'client and server versions');
	($rc, $out) = run_in('/', 'env', @env, $cli, 'submit', '--team', 'vision', '--workers', '2', '--gpus', '4',
		'--name', 'packaged', '--', 'python', 'train.py');
	is($rc, 0, 'the packaged CLI submits a job as a portal role') or diag $out;
	my ($job) = $out =~ /^submitted job (\d+)$/m;
	ok($job, 'and prints its id');
	is($sql->('SELECT placed FROM gangsched.run_round()'), '1', 'a round with the packaged library places it');
	isnt($sql->("SELECT state FROM gangsched.jobs WHERE job = $job"), 'pending', 'the job left the queue');
	($rc, $out) = run_in('/', 'env', @env, $cli, 'queue');
	is($rc, 0, 'the packaged CLI lists the queue') or diag $out;

	for my $prog (qw(gangsched-agent gangsched-replay))
	{
		($rc, $out) = run_in('/', "$root/usr/bin/$prog", '--version');
		is($rc, 0, "the packaged $prog runs (--version)") or diag $out;
		like($out, qr/\Q$extversion\E/, "and says $extversion");
	}

	is($sql->('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'no invariant violation');
	$node->stop;
}

done_testing();
