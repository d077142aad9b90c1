-- DBeaver's MySQL/MariaDB driver: what it sends when it opens a connection and browses schema
-- `shop` (connect, expand the schema, open a table's columns/indexes/constraints/foreign keys,
-- triggers, procedures, events, the schema's size). Source: dbeaver/dbeaver,
-- plugins/org.jkiss.dbeaver.ext.mysql/src/org/jkiss/dbeaver/ext/mysql/model/ (file and method
-- named before each statement; the prepared statements' `?` filled with the schema and table).
-- Foreign keys are read through the JDBC driver (MySQLTable.loadForeignKeys() calls
-- DatabaseMetaData.getImportedKeys), not with DBeaver's own SQL, so they are not here.
-- Run by tests/tests/clients.rs (gui_clients_statements...): `-- [name]` names the statement
-- after it; statements end at a top-level `;`.

-- [engines] MySQLDataSource.java, initialize(): "Read engines"
SHOW ENGINES;

-- [charsets] MySQLDataSource.java, initialize(): "Read charsets and collations"
SHOW CHARSET;

-- [collations] MySQLDataSource.java, initialize(): "Read charsets and collations"
SHOW COLLATION;

-- [schemata] MySQLDataSource.java, CatalogCache.prepareObjectsStatement(): catalogs
SELECT * FROM information_schema.SCHEMATA;

-- [current database] MySQLUtils.determineCurrentDatabase(), called from MySQLDataSource.initialize()
SELECT DATABASE();

-- [use schema] MySQLDataSource.java, useDatabase(): the active catalog
use `shop`;

-- [tables] MySQLCatalog.java, TableCache.prepareLookupStatement(): client-side filter
SHOW FULL TABLES FROM `shop`;

-- [one table] MySQLCatalog.java, TableCache.prepareLookupStatement(): lookup of one table
SHOW FULL TABLES FROM `shop` LIKE 'orders';

-- [columns of the schema] MySQLCatalog.java, TableCache.prepareChildrenStatement(): all tables
SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='shop' ORDER BY ORDINAL_POSITION;

-- [columns of orders] MySQLCatalog.java, TableCache.prepareChildrenStatement(): one table
SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='shop' AND TABLE_NAME='orders' ORDER BY ORDINAL_POSITION;

-- [indexes of order_item] MySQLCatalog.java, IndexCache.prepareObjectsStatement()
SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA='shop' AND TABLE_NAME='order_item' ORDER BY INDEX_NAME,SEQ_IN_INDEX;

-- [unique keys of the schema] MySQLCatalog.java, ConstraintCache.prepareObjectsStatement()
SELECT kc.CONSTRAINT_NAME,kc.TABLE_NAME,kc.COLUMN_NAME,kc.ORDINAL_POSITION
FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE kc WHERE kc.TABLE_SCHEMA='shop' AND kc.REFERENCED_TABLE_NAME IS NULL
ORDER BY kc.CONSTRAINT_NAME,kc.ORDINAL_POSITION;

-- [partitions of orders] MySQLTable.java, PartitionCache.prepareObjectsStatement()
SELECT * FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA='shop' AND TABLE_NAME='orders' ORDER BY PARTITION_ORDINAL_POSITION,SUBPARTITION_ORDINAL_POSITION;

-- [table status] MySQLTable.java, loadAdditionalInfo(): the table's properties page
SHOW TABLE STATUS FROM `shop` LIKE 'orders';

-- [routines] MySQLCatalog.java, ProceduresCache.prepareLookupStatement()
SELECT * FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA='shop'
ORDER BY ROUTINE_NAME;

-- [triggers] MySQLCatalog.java, TriggerCache.prepareObjectsStatement()
SHOW FULL TRIGGERS FROM `shop`;

-- [events] MySQLCatalog.java, EventCache.prepareObjectsStatement()
SELECT * FROM information_schema.EVENTS WHERE EVENT_SCHEMA='shop';

-- [schema size] MySQLCatalog.java, getDatabaseSize(): a sum over every table (and shard)
SELECT SUM((DATA_LENGTH+INDEX_LENGTH))
FROM INFORMATION_SCHEMA.TABLES
WHERE TABLE_SCHEMA='shop';

-- [privileges] MySQLDataSource.java, loadPrivileges()
SHOW PRIVILEGES;

-- [users] MySQLDataSource.java, loadUsers(): the Users node
SELECT * FROM mysql.user ORDER BY user;
