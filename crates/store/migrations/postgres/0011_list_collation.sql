-- Every text column compares bytes (COLLATE "C"), as SQLite's BINARY does.
--
-- Ids are text, so every index descent on a key compares text: under a
-- libc locale other than C (a cluster initialized as C.UTF-8 or en_US.UTF-8)
-- each comparison goes through strcoll, about a tenth of what a workspace
-- page costs (issue 10, lists that scale). Byte order is also the order
-- SQLite sorts in, so names sort the same on both back ends (for valid UTF-8
-- it is code point order, the order C.UTF-8 gives too).
--
-- All text columns change at once, not only the keys: ids are compared
-- across tables in joins, and a btree index serves a comparison only in its
-- own collation. Text columns added by later migrations should say
-- COLLATE "C" too: compared with these, a column of the database's default
-- collation compares as "C" (results stay right), but an index on it could
-- not serve that comparison. Indexes on these columns are rebuilt; rows are
-- not rewritten (the storage is the same). A column whose type changes
-- loses its statistics, which autovacuum would not gather again (no row
-- changed) and the planner needs: each table is analyzed again.
DO $$
DECLARE
    col record;
    tab text;
BEGIN
    FOR col IN
        SELECT c.table_name, c.column_name
        FROM information_schema.columns c
        JOIN information_schema.tables t
          ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = current_schema()
          AND t.table_type = 'BASE TABLE'
          AND c.data_type = 'text'
          AND c.table_name <> '_sqlx_migrations'
        ORDER BY c.table_name, c.ordinal_position
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE text COLLATE "C"',
                       col.table_name, col.column_name);
    END LOOP;
    FOR tab IN
        SELECT DISTINCT c.table_name
        FROM information_schema.columns c
        JOIN information_schema.tables t
          ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = current_schema()
          AND t.table_type = 'BASE TABLE'
          AND c.data_type = 'text'
          AND c.table_name <> '_sqlx_migrations'
    LOOP
        EXECUTE format('ANALYZE %I', tab);
    END LOOP;
END
$$;
