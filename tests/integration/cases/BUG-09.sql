-- BUG-09  UPDATE that does not touch a TOASTed column (adapted: no slot/peek/drop)
CREATE TABLE article (
    article_id  int PRIMARY KEY,
    title       text,
    body        text,
    summary     text
);
CREATE TABLE article_full (LIKE article INCLUDING ALL);
ALTER TABLE article_full REPLICA IDENTITY FULL;
CREATE FUNCTION big_text(seed int) RETURNS text LANGUAGE sql AS
$$ SELECT string_agg(md5((seed * 100000 + g)::text), '') FROM generate_series(1, 1250) g $$;
INSERT INTO article      VALUES (1, 'first', big_text(1), 'short');
INSERT INTO article_full VALUES (1, 'first', big_text(1), 'short');
-- @@ workload
UPDATE article      SET title = 'second' WHERE article_id = 1;
UPDATE article_full SET title = 'second' WHERE article_id = 1;
UPDATE article      SET body = NULL WHERE article_id = 1;
UPDATE article      SET body = big_text(2), title = 'third' WHERE article_id = 1;
DELETE FROM article_full WHERE article_id = 1;
