-- 004_user_identity: the SQLite index's 013_user_identity (see there): a
-- user remembers when it was registered, and the users deleted before this
-- migration that a record names leave nothing behind: their skills go to
-- the default identity, their uids leave every user scope.
ALTER TABLE users ADD COLUMN created_at BIGINT;

CREATE TEMP TABLE gone_users ON COMMIT DROP AS
    SELECT uid FROM (
        SELECT creator COLLATE "C" AS uid FROM skills
        UNION SELECT installer COLLATE "C" FROM versions
        UNION SELECT uid COLLATE "C" FROM sessions
        UNION SELECT added_by COLLATE "C" FROM curated_sources) AS named
    WHERE uid <> '' AND uid NOT IN (SELECT uid FROM users);

UPDATE skills SET creator = 'operator' WHERE creator IN (SELECT uid FROM gone_users);

UPDATE skills SET share = jsonb_set(share::jsonb, '{read,ids}', COALESCE((
        SELECT jsonb_agg(id ORDER BY id COLLATE "C")
        FROM jsonb_array_elements_text(share::jsonb -> 'read' -> 'ids') AS e(id)
        WHERE id NOT IN (SELECT uid FROM gone_users)), '[]'::jsonb))::text
    WHERE share::jsonb -> 'read' ->> 'kind' = 'user'
      AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(share::jsonb -> 'read' -> 'ids') AS e(id)
                  WHERE id IN (SELECT uid FROM gone_users));
UPDATE skills SET share = jsonb_set(share::jsonb, '{read,ids}', jsonb_build_array(creator))::text
    WHERE share::jsonb -> 'read' ->> 'kind' = 'user' AND jsonb_array_length(share::jsonb -> 'read' -> 'ids') = 0;

UPDATE skills SET share = jsonb_set(share::jsonb, '{manage,ids}', COALESCE((
        SELECT jsonb_agg(id ORDER BY id COLLATE "C")
        FROM jsonb_array_elements_text(share::jsonb -> 'manage' -> 'ids') AS e(id)
        WHERE id NOT IN (SELECT uid FROM gone_users)), '[]'::jsonb))::text
    WHERE share::jsonb -> 'manage' ->> 'kind' = 'user'
      AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(share::jsonb -> 'manage' -> 'ids') AS e(id)
                  WHERE id IN (SELECT uid FROM gone_users));
UPDATE skills SET share = jsonb_set(share::jsonb, '{manage}', '{"kind": ""}'::jsonb)::text
    WHERE share::jsonb -> 'manage' ->> 'kind' = 'user' AND jsonb_array_length(share::jsonb -> 'manage' -> 'ids') = 0;
