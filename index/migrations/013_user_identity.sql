-- 013_user_identity: a user's identity is not reusable by name. Users are
-- named by uid everywhere (creators, share scopes, sessions, drafts); when a
-- user is deleted, the skills they created go to another user and their uid
-- leaves every share scope, in the transaction that deletes them
-- (DB.DeleteUser), so a new user of that name starts with nothing of the
-- old one's.
--
-- A user remembers when it was registered, so that what was recorded under
-- its uid before (a draft on another host's disk) is not taken for its own.
-- Users registered before this migration have no time (NULL): older than
-- anything.
ALTER TABLE users ADD COLUMN created_at INTEGER;

-- Users deleted before this migration left their uid behind. Those that a
-- record names — as a skill's creator, a version's installer, a session's
-- user or a curated source's adder, all of which only a registered user can
-- have been — are known to be gone; a share naming an uid nothing else names
-- may be one given ahead of that user's registration, and stays.
CREATE TEMP TABLE gone_users AS
    SELECT uid FROM (
        SELECT creator AS uid FROM skills
        UNION SELECT installer FROM versions
        UNION SELECT uid FROM sessions
        UNION SELECT added_by FROM curated_sources)
    WHERE uid <> '' AND uid NOT IN (SELECT uid FROM users);

-- Their skills go to the default identity, which is never deleted...
UPDATE skills SET creator = 'operator' WHERE creator IN (SELECT uid FROM gone_users);

-- ...and their uids leave every user scope: a read scope left empty is its
-- creator's alone (private), a manage scope left empty is unset.
UPDATE skills SET share = json_set(share, '$.read.ids', json((
        SELECT json_group_array(value) FROM (
            SELECT value FROM json_each(skills.share, '$.read.ids')
            WHERE value NOT IN (SELECT uid FROM gone_users) ORDER BY value))))
    WHERE json_extract(share, '$.read.kind') = 'user'
      AND EXISTS (SELECT 1 FROM json_each(skills.share, '$.read.ids') WHERE value IN (SELECT uid FROM gone_users));
UPDATE skills SET share = json_set(share, '$.read.ids', json_array(creator))
    WHERE json_extract(share, '$.read.kind') = 'user' AND json_array_length(share, '$.read.ids') = 0;

UPDATE skills SET share = json_set(share, '$.manage.ids', json((
        SELECT json_group_array(value) FROM (
            SELECT value FROM json_each(skills.share, '$.manage.ids')
            WHERE value NOT IN (SELECT uid FROM gone_users) ORDER BY value))))
    WHERE json_extract(share, '$.manage.kind') = 'user'
      AND EXISTS (SELECT 1 FROM json_each(skills.share, '$.manage.ids') WHERE value IN (SELECT uid FROM gone_users));
UPDATE skills SET share = json_set(share, '$.manage', json('{"kind":""}'))
    WHERE json_extract(share, '$.manage.kind') = 'user' AND json_array_length(share, '$.manage.ids') = 0;

DROP TABLE temp.gone_users;
