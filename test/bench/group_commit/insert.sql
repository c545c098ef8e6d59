-- one single-row INSERT transaction of group_commit.sh: a random key per row
-- (collisions are upserts; count(DISTINCT id) is checked at the end)
\set r random(1, 9000000000000000)
INSERT INTO t VALUES ('c' || :client_id || '-' || :r, :r, '{"step": 1, "role": "agent", "reward": 0.5}');
