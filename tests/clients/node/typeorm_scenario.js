// TypeORM 0.3 (mysql2 driver) against the demo-like schema: entities declared with
// EntitySchema (no decorators, no build step), the tables created with raw SQL, rows saved
// through repositories, then the shapes issue 49 names: paging with relations (`find` with
// `relations` + `skip`/`take`, which TypeORM answers with `SELECT DISTINCT distinctAlias...`
// over a LEFT JOIN, then the page's rows by id), the same pinned to one user,
// `leftJoinAndSelect` + `skip`/`take` in a query builder, an `IN (subquery)` built with
// `subQuery()`, and `findAndCount` with a relation. The relation joins `order_item` on
// `order_id` alone (not on the shard key), as TypeORM writes it. Prints the transcript.
'use strict';

require('reflect-metadata');
const { DataSource, EntitySchema } = require('typeorm');
const { connection, Transcript, ORDERS, ITEMS } = require('./transcript');

console.log = (...args) => console.error(...args);
console.warn = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const Order = new EntitySchema({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: 'int', primary: true },
    user_id: { type: 'int' },
    status: { type: 'varchar', length: 10 },
    amount: { type: 'decimal', precision: 10, scale: 2 },
    country_code: { type: 'char', length: 2, nullable: true },
  },
  relations: {
    items: { type: 'one-to-many', target: 'OrderItem', inverseSide: 'order' },
  },
});

const OrderItem = new EntitySchema({
  name: 'OrderItem',
  tableName: 'order_item',
  columns: {
    id: { type: 'int', primary: true },
    order_id: { type: 'int' },
    user_id: { type: 'int' },
    sku: { type: 'varchar', length: 20 },
    qty: { type: 'int' },
  },
  relations: {
    order: {
      type: 'many-to-one',
      target: 'Order',
      joinColumn: { name: 'order_id' },
      inverseSide: 'items',
      createForeignKeyConstraints: false,
    },
  },
});

// Entities as plain values, items sorted by id (a relation's rows come in no fixed order).
function orders(list) {
  return list.map((o) => ({
    ...o,
    items: o.items ? [...o.items].sort((a, b) => a.id - b.id) : undefined,
  }));
}

async function main() {
  const c = connection();
  const ds = new DataSource({
    type: 'mysql',
    host: c.host,
    port: c.port,
    username: c.user,
    password: c.password,
    database: c.db,
    entities: [Order, OrderItem],
    synchronize: false,
    logging: false,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
    poolSize: 2,
  });
  const t = new Transcript();
  await t.step('initialize', () => ds.initialize().then(() => 'ok'));
  await t.step('create tables', async () => {
    for (const name of ['order_item', 'orders']) {
      await ds.query(`DROP TABLE IF EXISTS ${name}`);
    }
    await ds.query('CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, amount DECIMAL(10,2) NOT NULL, country_code CHAR(2), KEY (user_id))');
    await ds.query('CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (user_id))');
  });
  const orderRepo = ds.getRepository('Order');
  const itemRepo = ds.getRepository('OrderItem');
  await t.step('save orders and items', async () => {
    await orderRepo.insert(ORDERS);
    await itemRepo.insert(ITEMS);
    return [await orderRepo.count(), await itemRepo.count()];
  });
  await t.step('find with relations, skip/take (paging)', async () =>
    orders(await orderRepo.find({ relations: { items: true }, order: { id: 'ASC' }, skip: 2, take: 3 })));
  await t.step('find with relations, skip/take, one user', async () =>
    orders(await orderRepo.find({ where: { user_id: 2 }, relations: { items: true }, order: { id: 'ASC' }, skip: 0, take: 1 })));
  await t.step('leftJoinAndSelect with skip/take', async () =>
    orders(await orderRepo.createQueryBuilder('o')
      .leftJoinAndSelect('o.items', 'i')
      .where('o.status = :s', { s: 'paid' })
      .orderBy('o.amount', 'DESC')
      .addOrderBy('o.id', 'ASC')
      .skip(1)
      .take(3)
      .getMany()));
  await t.step('IN (subquery)', async () => {
    const qb = orderRepo.createQueryBuilder('o');
    const sub = qb.subQuery().select('i.order_id').from('order_item', 'i').where('i.qty > :q').getQuery();
    return orders(await qb.where(`o.id IN ${sub}`).setParameter('q', 3).orderBy('o.id', 'ASC').getMany());
  });
  await t.step('findAndCount with relations', async () => {
    const [list, n] = await orderRepo.findAndCount({ relations: { items: true }, where: { status: 'new' }, order: { id: 'ASC' }, take: 2 });
    return [orders(list), n];
  });
  await t.step('destroy', () => ds.destroy().then(() => 'ok'));
  t.dump();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
