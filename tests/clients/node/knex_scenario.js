// Knex 3 (mysql2 client) against the demo-like schema: the schema builder (hasTable,
// createTable, hasColumn, alterTable), CRUD, a transaction committed and one rolled back,
// query-builder joins and aggregates, and the migrator: migrate.latest() over
// tests/clients/node/knex_migrations (two migrations), list, currentVersion, rollback. Prints the transcript of every answer as JSON.
'use strict';

const path = require('path');
const knexFactory = require('knex');
const { connection, Transcript, COUNTRIES, ORDERS, ITEMS, LEDGER } = require('./transcript');

// Libraries log warnings with console.*: stdout carries the transcript alone.
console.log = (...args) => console.error(...args);
console.warn = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

async function main() {
  const c = connection();
  const knex = knexFactory({
    client: 'mysql2',
    connection: { host: c.host, port: c.port, user: c.user, password: c.password, database: c.db, dateStrings: true },
    pool: { min: 0, max: 2 },
    migrations: { directory: path.join(__dirname, 'knex_migrations'), tableName: 'knex_migrations' },
  });
  const t = new Transcript();
  const TABLES = ['order_item', 'orders', 'country', 'ledger'];
  // The migrator's tables and the first migration's.
  const MIGRATION_TABLES = ['knex_migrations', 'knex_migrations_lock', 'coupon'];
  const sorted = (rows) => rows.slice().sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

  await t.step('drop tables (dropTableIfExists)', async () => {
    for (const name of MIGRATION_TABLES) await knex.schema.dropTableIfExists(name);
    for (const name of ['alembic_version', ...TABLES]) await knex.schema.dropTableIfExists(name);
  });
  await t.step('hasTable before create', async () => Promise.all(TABLES.map((n) => knex.schema.hasTable(n))));
  await t.step('createTable', async () => {
    await knex.schema.createTable('country', (tb) => {
      tb.specificType('code', 'CHAR(2)').primary();
      tb.string('name', 40).notNullable();
    });
    await knex.schema.createTable('orders', (tb) => {
      tb.integer('id').primary();
      tb.integer('user_id').notNullable().index();
      tb.string('status', 10).notNullable();
      tb.decimal('amount', 10, 2).notNullable();
      tb.specificType('country_code', 'CHAR(2)');
    });
    await knex.schema.createTable('order_item', (tb) => {
      tb.integer('id').primary();
      tb.integer('order_id').notNullable();
      tb.integer('user_id').notNullable().index();
      tb.string('sku', 20).notNullable();
      tb.integer('qty').notNullable();
    });
    await knex.schema.createTable('ledger', (tb) => {
      tb.integer('id').primary();
      tb.date('day').notNullable();
      tb.string('account', 20).notNullable();
      tb.decimal('amount', 12, 2).notNullable();
    });
    return 'created';
  });
  await t.step('raw CREATE TABLE IF NOT EXISTS (whatever createTable did)', async () => {
    await knex.raw('CREATE TABLE IF NOT EXISTS country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL)');
    await knex.raw('CREATE TABLE IF NOT EXISTS orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, amount DECIMAL(10,2) NOT NULL, country_code CHAR(2), KEY (user_id))');
    await knex.raw('CREATE TABLE IF NOT EXISTS order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (user_id))');
    await knex.raw('CREATE TABLE IF NOT EXISTS ledger (id INT NOT NULL PRIMARY KEY, day DATE NOT NULL, account VARCHAR(20) NOT NULL, amount DECIMAL(12,2) NOT NULL)');
  });
  await t.step('hasTable after create', async () => Promise.all([...TABLES, 'nope'].map((n) => knex.schema.hasTable(n))));
  await t.step('hasColumn', async () => [await knex.schema.hasColumn('orders', 'status'), await knex.schema.hasColumn('orders', 'nope')]);
  await t.step('columnInfo orders', () => knex('orders').columnInfo());

  await t.step('insert', async () => {
    await knex('country').insert(COUNTRIES.map(([code, name]) => ({ code, name })));
    await knex('orders').insert(ORDERS);
    await knex('order_item').insert(ITEMS);
    await knex('ledger').insert(LEDGER);
    return 'inserted';
  });
  const counts = async () => {
    const out = {};
    for (const n of TABLES.slice().sort()) out[n] = (await knex(n).count({ n: '*' }))[0].n;
    return out;
  };
  await t.step('counts after insert', counts);
  await t.step('first where id', () => knex('orders').where({ id: 5 }).first());
  await t.step('where user_id (routed)', () => knex('orders').where('user_id', 3).orderBy('id').select('id', 'status'));
  await t.step('update', async () => [await knex('orders').where({ id: 6 }).update({ status: 'done' }), await knex('orders').where({ id: 6 }).first('status')]);
  await t.step('increment (scattered)', async () => [await knex('orders').where('user_id', '>', 6).increment('amount', 1), await knex('orders').where('user_id', '>', 6).sum({ s: 'amount' })]);
  await t.step('delete', async () => [await knex('order_item').where({ order_id: 8 }).del(), await knex('orders').where({ id: 8 }).del()]);

  await t.step('transaction committed', async () => {
    await knex.transaction(async (trx) => {
      await trx('orders').insert({ id: 300, user_id: 4, status: 'new', amount: '5.00', country_code: 'de' });
      await trx('order_item').insert({ id: 3001, order_id: 300, user_id: 4, sku: 'sku-k', qty: 9 });
    });
    return knex('order_item').where({ order_id: 300 }).select('id', 'sku');
  });
  await t.step('transaction rolled back', async () => {
    try {
      await knex.transaction(async (trx) => {
        await trx('orders').insert({ id: 301, user_id: 5, status: 'new', amount: '6.00' });
        await trx('ledger').where('account', 'bank').update({ amount: 0 });
        await trx('country').where({ code: 'fr' }).del();
        throw new Error('rolled back on purpose');
      });
      return 'not rolled back';
    } catch (e) {
      return e.message;
    }
  });
  await t.step('counts after the transactions', counts);
  await t.step('no trace of the rolled-back one', async () => ({
    order301: (await knex('orders').where({ id: 301 }).count({ n: '*' }))[0].n,
    bank: (await knex('ledger').where({ account: 'bank' }).sum({ s: 'amount' }))[0].s,
    fr: (await knex('country').where({ code: 'fr' }).count({ n: '*' }))[0].n,
  }));
  await t.step('nested transaction (savepoint) rolled back', async () => {
    await knex.transaction(async (trx) => {
      await trx('orders').insert({ id: 302, user_id: 6, status: 'new', amount: '7.00' });
      try {
        await trx.transaction(async (inner) => {
          await inner('orders').insert({ id: 303, user_id: 7, status: 'new', amount: '8.00' });
          throw new Error('inner rolled back');
        });
      } catch (e) {
        if (e.message !== 'inner rolled back') throw e;
      }
    });
    return knex('orders').where('id', '>', 301).orderBy('id').pluck('id');
  });
  await t.step("delete the nested step's orders", () => knex('orders').where('id', '>', 301).del().then(() => 'deleted'));

  await t.step('join orders/items on both keys, order by', () => knex('orders as o')
    .join('order_item as i', function on() { this.on('i.order_id', 'o.id').andOn('i.user_id', 'o.user_id'); })
    .select('o.id', 'o.user_id', 'i.sku', 'i.qty')
    .orderBy([{ column: 'o.id' }, { column: 'i.id' }]));
  await t.step('join with the global table', () => knex('orders')
    .join('country', 'country.code', 'orders.country_code')
    .whereIn('orders.user_id', [1, 2, 3])
    .select('orders.id', 'country.name')
    .orderBy('orders.id'));
  await t.step('left join with the global table', () => knex('orders')
    .leftJoin('country', 'country.code', 'orders.country_code')
    .select('orders.id', 'country.name')
    .orderBy('orders.id'));
  await t.step('aggregate per user', () => knex('orders')
    .select('user_id')
    .count({ n: '*' })
    .sum({ total: 'amount' })
    .max({ top: 'status' })
    .groupBy('user_id')
    .orderBy('user_id'));
  await t.step('aggregate per user having, ordered by alias', () => knex('order_item')
    .select('user_id')
    .sum({ qty: 'qty' })
    .groupBy('user_id')
    .having(knex.raw('SUM(qty) > ?', [5]))
    .orderBy([{ column: 'qty', order: 'desc' }, { column: 'user_id' }]));
  await t.step('distinct', async () => sorted(await knex('orders').distinct('status')));
  await t.step('limit offset', () => knex('orders').orderBy([{ column: 'amount', order: 'desc' }, 'id']).limit(4).offset(2).pluck('id'));
  await t.step('ledger per account in 2024', () => knex('ledger')
    .whereBetween('day', ['2024-01-01', '2024-12-31'])
    .select('account')
    .count({ n: '*' })
    .sum({ total: 'amount' })
    .groupBy('account')
    .orderBy('account'));
  await t.step('ledger rows', async () => sorted(await knex('ledger').select('id', 'day', 'amount')));
  await t.step('alterTable add column', async () => {
    await knex.schema.alterTable('orders', (tb) => { tb.string('note', 40); });
    return [await knex.schema.hasColumn('orders', 'note'), (await knex('orders').whereNotNull('note').count({ n: '*' }))[0].n];
  });
  await t.step('migrate.list before', async () => {
    const [done, pending] = await knex.migrate.list();
    return { done: done.map((m) => m.name), pending: pending.map((m) => m.file) };
  });
  await t.step('migrate.latest', () => knex.migrate.latest());
  await t.step('migrate.currentVersion', () => knex.migrate.currentVersion());
  await t.step('knex_migrations rows', () => knex('knex_migrations').orderBy('id').select('name', 'batch'));
  await t.step('after the migrations: coupons and orders with a coupon', async () => ({
    coupons: await knex('coupon').orderBy('code').select('code', 'discount', 'valid_until'),
    orders: await knex('orders').whereNotNull('coupon_code').orderBy('id').select('id', 'coupon_code'),
  }));
  await t.step('migrate.latest again (nothing to do)', () => knex.migrate.latest());
  await t.step('migrate.rollback', () => knex.migrate.rollback());
  await t.step('after the rollback', async () => ({
    coupon: await knex.schema.hasTable('coupon'),
    coupon_code: await knex.schema.hasColumn('orders', 'coupon_code'),
    version: await knex.migrate.currentVersion(),
  }));
  await t.step('drop the migrator tables', async () => {
    for (const name of MIGRATION_TABLES) await knex.schema.dropTableIfExists(name);
    return 'dropped';
  });
  await t.step('dropTable', async () => {
    for (const name of TABLES) await knex.schema.dropTable(name);
    return Promise.all(TABLES.map((n) => knex.schema.hasTable(n)));
  });
  await knex.destroy();
  t.dump();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
