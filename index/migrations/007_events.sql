-- 007_events: the log the event streams replay from. Every event a daemon
-- publishes is written here first, in the transaction of the change it
-- reports where there is one (a first activation, a session's new pins, its
-- close). AUTOINCREMENT never reuses an id, so ids keep growing across
-- restarts and after pruning; a client that saw id N asks for what follows
-- it. payload is a JSON object of the fields of the event's type.

CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    type    TEXT    NOT NULL CHECK (type <> ''),
    session TEXT    NOT NULL,
    slug    TEXT    NOT NULL DEFAULT '',
    payload TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload) AND json_type(payload) = 'object')
) STRICT;

-- No index by session: a replay scans the ids after the client's (at most
-- the retained events), and every event spares the first activation's
-- commit a page.
