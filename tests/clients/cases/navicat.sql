-- Navicat (closed source): what it sends when it opens a connection and then schema `shop`, as
-- published general-log captures show it. Sources: actiontech/dble issue #633 ("Navicat
-- Premium 12 can not connect dble", the statement list in its first comment) and dolthub/dolt
-- issue #1416 ("Can't connect to mysql with navicat", the server's query trace); the schema
-- name is `shop` here. Navicat sends the first three as one multi-statement text; here they run
-- one by one.
-- Run by tests/tests/clients.rs (gui_clients_statements...): `-- [name]` names the statement
-- after it; statements end at a top-level `;`.

-- [names] dolt#1416 trace, first statement
SET NAMES utf8mb4;

-- [lower case variables] dolt#1416 trace; ShardingSphere#3572 packet dump
SHOW VARIABLES LIKE 'lower_case_%';

-- [sql mode] dolt#1416 trace
SHOW VARIABLES LIKE 'sql_mode';

-- [ndb support] dolt#1416 trace
SELECT COUNT(*) AS support_ndb FROM information_schema.ENGINES WHERE Engine = 'ndbcluster';

-- [schemata] dble#633 and dolt#1416: the connection tree's schemas
SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA;

-- [object counts] dble#633 and dolt#1416: opening a schema
SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop' UNION SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' UNION SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'shop';

-- [use schema] Navicat selects the schema it opens (dble#633 runs the rest in it)
USE `shop`;

-- [base tables] dble#633
SHOW FULL TABLES WHERE Table_type != 'VIEW';

-- [table status] dble#633: the object list's sizes and row counts
SHOW TABLE STATUS;

-- [tables] dble#633
SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop' ORDER BY TABLE_SCHEMA, TABLE_TYPE;

-- [columns] dble#633
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' ORDER BY TABLE_SCHEMA, TABLE_NAME;
