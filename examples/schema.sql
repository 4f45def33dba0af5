-- Example target: events partitioned by month on a UUIDv7 key.
CREATE TABLE events (
    id          uuid        NOT NULL,
    created_at  timestamptz NOT NULL,
    account_id  bigint      NOT NULL,
    kind        text        NOT NULL,
    amount      numeric(12,2),
    payload     jsonb,
    note        text,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
CREATE INDEX ON events (account_id);
