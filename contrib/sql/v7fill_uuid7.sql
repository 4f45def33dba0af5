-- v7fill_uuid7.sql - UUIDv7 helpers for PostgreSQL 13-17 (tested on 15).  PostgreSQL 18 has
-- uuidv7() built in but no floor function; nothing here clashes with its built-ins.
--
-- Install into the first schema of search_path (usually public):
--
--     psql -d mydb -f contrib/sql/v7fill_uuid7.sql
--     psql -d mydb -f /usr/local/share/v7fill/sql/v7fill_uuid7.sql     # after `make install`
--
-- To pick another schema, run `SET search_path = myschema;` first (for example with
-- PGOPTIONS='-c search_path=myschema').  Running the file again replaces the functions.
--
-- Functions (the layout is the one v7fill mints, RFC 9562 section 5.7 with the sub-millisecond
-- fraction in rand_a, section 6.2 method 3):
--
--   uuid7_floor(timestamptz) -> uuid
--       The smallest UUIDv7 of the instant's millisecond: the 48 bits of Unix milliseconds,
--       version 7, variant 10, every other bit zero.  The same value as `v7fill uuid floor TIME`,
--       and what v7fill uses for partition bounds.  Resolution is one millisecond: the
--       sub-millisecond part of the argument is dropped.  Times before 1970-01-01T00:00:00Z,
--       past 10889-08-02T05:31:50.655999Z (the 48-bit limit) and +-infinity raise an error.
--   uuid7_time(uuid) -> timestamptz
--       The instant an id carries: its milliseconds plus the microseconds decoded from rand_a,
--       ceil(rand_a * 1000 / 4096), the exact inverse of v7fill's minting
--       (rand_a = floor(us_within_ms * 4096 / 1000)); rand_a 4092..4095, never
--       minted by v7fill, decode to 999 µs so the time stays in the id's ms.  The same value as `v7fill uuid time`.
--       An id that is not a UUIDv7 raises "... is not a UUIDv7 (version 4)" and the like.
--   uuid7_is_v7(uuid) -> boolean
--       Version 7 and variant 10.  Never raises; use it to filter before uuid7_time.
--
-- Querying a time range [a, b) of a table partitioned on a UUIDv7 id: compare the id, never a
-- time computed from it, so the planner can prune partitions:
--
--     SELECT * FROM events
--      WHERE id >= uuid7_floor('2026-07-01 00:00:00+00')
--        AND id <  uuid7_floor('2026-08-01 00:00:00+00');
--
-- With constant arguments the planner folds uuid7_floor(...) to a uuid constant while planning,
-- so pruning happens at plan time (EXPLAIN lists only the partitions that can match).  With
-- parameters (prepared statements, generic plans, PL/pgSQL variables) the bounds are computed when
-- execution starts and the partitions are pruned then ("initial pruning"; EXPLAIN shows
-- "Subplans Removed: N").  `WHERE uuid7_time(id) >= ...` prunes nothing: it must compute the time of
-- every row of every partition.
--
-- Because floor has millisecond resolution, `id >= uuid7_floor(a)` also matches ids minted in
-- a's millisecond but before a's microsecond fraction, and `id < uuid7_floor(b)` misses ids of
-- b's millisecond before b.  With whole-millisecond bounds this never matters; otherwise see
-- docs/querying-by-time.md (widen the id range, then filter on uuid7_time(id)).
--
-- A time literal without an offset is read in the session's TimeZone, as everywhere in
-- PostgreSQL; write the offset (or Z) to be independent of it.
--
-- Properties: all three functions are IMMUTABLE (they depend only on the instant or the id, never
-- on the TimeZone setting) and PARALLEL SAFE.  uuid7_floor and uuid7_time return NULL for NULL
-- but are not declared STRICT: they are plain SQL functions that the planner inlines, and it
-- refuses to inline a STRICT function whose body has a CASE (the error branch).  uuid7_is_v7 is
-- STRICT and inlined.  The two v7fill_uuid7_raise_* functions are PL/pgSQL and only run to raise
-- the error; they are declared IMMUTABLE so that the inlined expressions stay immutable.
--
-- Only functions of PostgreSQL 13 are used (uuid_send, get_byte, to_hex, lpad, date_part, the
-- bit(n) casts); no uuid_extract_timestamp (PostgreSQL 17) or uuidv7() (18).

BEGIN;

-- Raises the out-of-range error of uuid7_floor; never returns.
CREATE OR REPLACE FUNCTION v7fill_uuid7_raise_time(ts timestamptz)
RETURNS uuid
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
DECLARE
    -- a year before the Common Era says so, as PostgreSQL writes it (... BC)
    shown text := CASE WHEN NOT isfinite(ts) THEN ts::text
                       WHEN ts < '0001-01-01 00:00:00+00'::timestamptz
                       THEN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z" BC')
                       ELSE to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') END;
BEGIN
    IF ts < '1970-01-01 00:00:00+00'::timestamptz THEN
        RAISE EXCEPTION 'time % is before 1970-01-01T00:00:00Z and cannot be a UUIDv7', shown
            USING ERRCODE = 'datetime_field_overflow';
    END IF;
    RAISE EXCEPTION 'time % is past the 48-bit millisecond range of UUIDv7', shown
        USING ERRCODE = 'datetime_field_overflow',
              HINT = 'The last encodable instant is 10889-08-02T05:31:50.655999Z.';
END
$fn$;

-- Raises the "not a UUIDv7" error of uuid7_time; never returns.
CREATE OR REPLACE FUNCTION v7fill_uuid7_raise_not_v7(u uuid)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
DECLARE
    b bytea := uuid_send(u);
BEGIN
    IF u = '00000000-0000-0000-0000-000000000000'::uuid THEN
        RAISE EXCEPTION '% is the nil UUID, not a UUIDv7', u
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF get_byte(b, 6) >> 4 <> 7 THEN
        RAISE EXCEPTION '% is not a UUIDv7 (version %)', u, get_byte(b, 6) >> 4
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RAISE EXCEPTION '% is not a UUIDv7 (variant bits are not 10)', u
        USING ERRCODE = 'invalid_parameter_value';
END
$fn$;

-- Version nibble 0111 and variant bits 10, tested in one comparison (no AND) so that the
-- body contains only strict constructs and the STRICT function can still be inlined.
CREATE OR REPLACE FUNCTION uuid7_is_v7(u uuid)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT (((get_byte(uuid_send(u), 6) & 240) << 8) | (get_byte(uuid_send(u), 8) & 192)) = 28800
$fn$;

-- uuid7_floor and uuid7_time call the raise functions above.  An inlined SQL function body is
-- parsed with the caller's search_path, so the call is written schema-qualified; the DO block
-- puts the install schema into the text (@schema@).
DO $install$
DECLARE
    s text := current_schema();
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION 'no schema to install into: search_path names no existing schema';
    END IF;

    -- ms = whole minutes (exact in float8) * 1000 + microseconds within the minute / 1000.
    -- date_part on a timestamp in UTC keeps it exact on every version (extract(epoch from ...)
    -- is float8 before PostgreSQL 14) and independent of the TimeZone setting.
    EXECUTE replace($body$
CREATE OR REPLACE FUNCTION uuid7_floor(ts timestamptz)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE
        WHEN ts < '1970-01-01 00:00:00+00'::timestamptz
          OR ts >= '10889-08-02 05:31:50.656+00'::timestamptz
        THEN @schema@.v7fill_uuid7_raise_time(ts)
        ELSE (lpad(to_hex(date_part('epoch', date_trunc('minute', ts AT TIME ZONE 'UTC'))::bigint * 1000
                          + date_part('microseconds', ts AT TIME ZONE 'UTC')::bigint / 1000),
                   12, '0')
              || '70008000000000000000')::uuid
    END
$fn$
$body$, '@schema@', quote_ident(s));

    -- ms from the first 12 hex digits; rand_a from the low nibble of byte 6 and byte 7;
    -- the instant is built on a timestamp (immutable arithmetic, integers only, exact up to
    -- the 48-bit limit) and then read as UTC.
    EXECUTE replace($body$
CREATE OR REPLACE FUNCTION uuid7_time(u uuid)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE
        WHEN (((get_byte(uuid_send(u), 6) & 240) << 8) | (get_byte(uuid_send(u), 8) & 192)) <> 28800
        THEN @schema@.v7fill_uuid7_raise_not_v7(u)
        ELSE (timestamp '1970-01-01 00:00:00'
              + (('x' || replace(left(u::text, 13), '-', ''))::bit(48)::bigint / 1000)
                * interval '1 second'
              + ((('x' || replace(left(u::text, 13), '-', ''))::bit(48)::bigint % 1000) * 1000
                 + least(((((get_byte(uuid_send(u), 6) & 15) << 8) | get_byte(uuid_send(u), 7)) * 1000
                    + 4095) / 4096, 999))
                * interval '1 microsecond'
             ) AT TIME ZONE 'UTC'
    END
$fn$
$body$, '@schema@', quote_ident(s));
END
$install$;

COMMENT ON FUNCTION uuid7_floor(timestamptz) IS
    'smallest UUIDv7 of the instant''s millisecond (v7fill uuid floor); query [a, b) as id >= uuid7_floor(a) AND id < uuid7_floor(b)';
COMMENT ON FUNCTION uuid7_time(uuid) IS
    'instant a UUIDv7 carries, with the microseconds from rand_a (v7fill uuid time)';
COMMENT ON FUNCTION uuid7_is_v7(uuid) IS
    'true for version 7, variant 10';

COMMIT;
