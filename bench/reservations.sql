-- run.sh --reservations N: N advance reservations (docs/time.md), each of
-- 16 consecutive nodes (so on racks of the benchmark's topology) for one
-- team in turn, starting a day after the scheduler's now, an hour apart,
-- each lasting a day: before their start, other teams' jobs without a
-- time limit (or with one that runs past the start) are kept off those
-- nodes. A build without add_reservation books nothing.
-- psql variables: reservations (N), teams.
SELECT EXISTS (SELECT FROM pg_catalog.pg_proc p
                WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname = 'add_reservation') AS has_resv \gset
\if :has_resv
SELECT count(gangsched.add_reservation(
           name   => format('bench-r%s', r),
           team   => format('team%s', r % :teams + 1),
           nodes  => ARRAY(SELECT format('n%s', lpad(i::text, 5, '0'))
                             FROM generate_series(r * 16, r * 16 + 15) i),
           starts => gangsched.now() + interval '1 day' + r * interval '1 hour',
           ends   => gangsched.now() + interval '2 days' + r * interval '1 hour')) AS reservations_added
  FROM generate_series(0, :reservations - 1) r;
\endif
