-- 004_plugins_worktrees: a skill remembers the plugin it came from (skills
-- of a plugin marketplace are namespaced by it), and a version remembers
-- whether the local git working tree it was read from matched its commit.

ALTER TABLE skills ADD COLUMN plugin TEXT NOT NULL DEFAULT '';

-- '' when the source was no local git working tree; 'clean' when the files
-- matched the commit recorded in commit_id; 'modified' when they did not.
ALTER TABLE versions ADD COLUMN worktree TEXT NOT NULL DEFAULT ''
    CHECK (worktree IN ('', 'clean', 'modified'));
