-- One row naming this installation, made once with the schema (the
-- installation table of 0005 holds one-shot facts, not values). serve-api
-- derives its default MQTT client id from it: a client id from the host
-- name alone resumed, on a host where another installation had run, that
-- installation's persistent session and its queued messages.
CREATE TABLE installation_identity (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id        text    NOT NULL
);
INSERT INTO installation_identity (id) VALUES (replace(gen_random_uuid()::text, '-', ''));
