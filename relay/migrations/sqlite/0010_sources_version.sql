-- The version of the set of sources kept in the database, raised by every
-- change to it. A change is written only over the version it read (the
-- relay reads the set, checks the set that results, then writes): two
-- changes made at once can never leave a set neither checked.
CREATE TABLE sources_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO sources_version (id, version) VALUES (1, 0);
