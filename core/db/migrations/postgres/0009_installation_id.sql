-- One row naming this installation, made once with the schema (the
-- installation table of 0005 holds one-shot facts, not values). serve-api
-- derives its default MQTT client id from it: a client id from the host
-- name alone resumed, on a host where another installation had run, that
-- installation's persistent session and its queued messages.
--
-- legacy_client_id is true when the schema came to a database already in
-- use: that serve-api keeps the host-name client id it had, so the
-- messages the broker queued for it during the upgrade are not stranded
-- under the old id.
CREATE TABLE installation_identity (
    singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id               text    NOT NULL,
    legacy_client_id boolean NOT NULL
);
INSERT INTO installation_identity (id, legacy_client_id)
VALUES (replace(gen_random_uuid()::text, '-', ''),
        EXISTS (SELECT 1 FROM tenants) OR EXISTS (SELECT 1 FROM readings));
