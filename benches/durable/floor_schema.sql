-- The floor's tables (schema phaseo_floor), made fresh: shared by pgbench_floor.sh and the
-- durable bench (benches/durable/postgres.rs).
SET client_min_messages TO warning;
DROP SCHEMA IF EXISTS phaseo_floor CASCADE;
CREATE SCHEMA phaseo_floor;
CREATE TABLE phaseo_floor.tiny (v int);
CREATE TABLE phaseo_floor.journal (id bigserial PRIMARY KEY, run_id bigint NOT NULL, entry text NOT NULL);
CREATE TABLE phaseo_floor.snapshot (id int PRIMARY KEY, body text NOT NULL);
INSERT INTO phaseo_floor.snapshot (id, body)
SELECT k, left(string_agg(CASE WHEN g % 3 = 0
           THEN substr(md5('id' || k::text || ':' || g::text), 1, 12)
           ELSE (ARRAY['{"role":"assistant",', '"content":', '"tool_calls":[', '"name":"get_status",',
                  '"arguments":', '{"service":', '"api"}', 'the', 'tool', 'result', 'status', 'ok',
                  'order', 'customer', 'flight', 'booking', 'refund', 'invoice', 'approved',
                  'pending', 'shipment', 'please', 'check', 'confirm', 'account', 'number',
                  'berlin', 'paris', 'tomorrow', 'morning', 'price', 'total'])
           [1 + ('x' || substr(md5(k::text || ':' || g::text), 1, 7))::bit(28)::int % 32] END,
           ' ' ORDER BY g), 6700)
FROM generate_series(1, 2) AS k, generate_series(1, 1500) AS g
GROUP BY k;
ANALYZE phaseo_floor.snapshot;
