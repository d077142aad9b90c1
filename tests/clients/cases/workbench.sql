-- MySQL Workbench's reverse engineering of schema `shop` (Database > Reverse Engineer): what
-- its module DbMySQLRE sends. Source: mysql/mysql-workbench, modules/db.mysql/db_mysql_re_grt.py
-- (function named before each statement).
-- Run by tests/tests/clients.rs (gui_clients_statements...): `-- [name]` names the statement
-- after it; statements end at a top-level `;`.

-- [version] db_mysql_re_grt.py, connect() and getServerVersion()
SHOW VARIABLES LIKE 'version';

-- [schemas] db_mysql_re_grt.py, getSchemaNames()
SHOW DATABASES;

-- [all tables] db_mysql_re_grt.py, getAllTableNames()
SHOW TABLES FROM `shop`;

-- [base tables] db_mysql_re_grt.py, getTableNames()
SHOW FULL TABLES FROM `shop` WHERE Table_type <> 'VIEW';

-- [views] db_mysql_re_grt.py, getViewNames()
SHOW FULL TABLES FROM `shop` WHERE Table_type = 'VIEW';

-- [triggers] db_mysql_re_grt.py, getTriggerNames()
SHOW TRIGGERS FROM `shop`;

-- [procedures] db_mysql_re_grt.py, getProcedureNames()
SHOW PROCEDURE STATUS WHERE Db='shop';

-- [functions] db_mysql_re_grt.py, getFunctionNames()
SHOW FUNCTION STATUS WHERE Db='shop';

-- [compile os] db_mysql_re_grt.py, getOS()
SELECT @@version_compile_os;

-- [sql mode] db_mysql_re_grt.py, getServerMode()
SELECT @@SESSION.sql_mode;

-- [create table orders] db_mysql_re_grt.py, reverseEngineer(): one SHOW CREATE TABLE a table
SHOW CREATE TABLE `shop`.`orders`;

-- [create table order_item] db_mysql_re_grt.py, reverseEngineer()
SHOW CREATE TABLE `shop`.`order_item`;

-- [create table country] db_mysql_re_grt.py, reverseEngineer()
SHOW CREATE TABLE `shop`.`country`;

-- [create table ledger] db_mysql_re_grt.py, reverseEngineer()
SHOW CREATE TABLE `shop`.`ledger`;
