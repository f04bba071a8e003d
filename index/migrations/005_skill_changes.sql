-- 005_skill_changes: a log of which skills changed, so a process can keep
-- the catalog in memory and re-read only the rows another writer (this
-- process or another one) changed since it last looked. Each slug keeps its
-- latest change only: seq grows with every insert, update or delete of its
-- row (AUTOINCREMENT never reuses a number), and a deleted skill's entry
-- stays behind as the note that it is gone.

CREATE TABLE skill_changes (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    slug TEXT NOT NULL UNIQUE
);

CREATE TRIGGER skills_changed_insert AFTER INSERT ON skills BEGIN
    INSERT OR REPLACE INTO skill_changes (slug) VALUES (NEW.slug);
END;

CREATE TRIGGER skills_changed_update AFTER UPDATE ON skills BEGIN
    INSERT OR REPLACE INTO skill_changes (slug) VALUES (OLD.slug);
    INSERT OR REPLACE INTO skill_changes (slug) VALUES (NEW.slug);
END;

CREATE TRIGGER skills_changed_delete AFTER DELETE ON skills BEGIN
    INSERT OR REPLACE INTO skill_changes (slug) VALUES (OLD.slug);
END;

-- Skills already in the index count as changed once.
INSERT INTO skill_changes (slug) SELECT slug FROM skills ORDER BY slug;
