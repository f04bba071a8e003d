-- 006_session_pins_inline: a session's pins live in its own row, as a JSON
-- list of [slug, version] in closure order, rather than one row each. A
-- session of every skill in a catalog of 10,000 is then one row to write
-- and read, not 10,000 rows and three index entries each.

ALTER TABLE sessions ADD COLUMN pins TEXT NOT NULL DEFAULT '[]';

UPDATE sessions SET pins = coalesce(
    (SELECT json_group_array(json_array(slug, version) ORDER BY position)
       FROM session_pins p WHERE p.session = sessions.id), '[]');

DROP TABLE session_pins;
