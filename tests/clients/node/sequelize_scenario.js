// Sequelize 6 (mysql2 dialect) against the demo-like schema: models defined, sync() (which
// creates the tables through the connection; a raw CREATE TABLE IF NOT EXISTS follows so that
// the steps after it run whatever sync answered), CRUD, a managed transaction committed and one
// rolled back, findAll with include (association) and order, aggregates. Prints the
// transcript of every answer as JSON.
'use strict';

const { Sequelize, DataTypes, Op } = require('sequelize');
const { connection, Transcript, COUNTRIES, ORDERS, ITEMS, LEDGER } = require('./transcript');

// Libraries log warnings with console.*: stdout carries the transcript alone.
console.log = (...args) => console.error(...args);
console.warn = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

async function main() {
  const c = connection();
  const sequelize = new Sequelize(c.db, c.user, c.password, {
    host: c.host,
    port: c.port,
    dialect: 'mysql',
    logging: false,
    dialectOptions: { dateStrings: true, typeCast: true },
    pool: { max: 2 },
  });
  const t = new Transcript();
  const opts = { timestamps: false, freezeTableName: true };
  const Country = sequelize.define('country', {
    code: { type: DataTypes.CHAR(2), primaryKey: true },
    name: { type: DataTypes.STRING(40), allowNull: false },
  }, opts);
  const Order = sequelize.define('orders', {
    id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: false },
    user_id: { type: DataTypes.INTEGER, allowNull: false },
    status: { type: DataTypes.STRING(10), allowNull: false },
    amount: { type: DataTypes.DECIMAL(10, 2), allowNull: false },
    country_code: { type: DataTypes.CHAR(2) },
  }, { ...opts, indexes: [{ fields: ['user_id'] }] });
  const OrderItem = sequelize.define('order_item', {
    id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: false },
    order_id: { type: DataTypes.INTEGER, allowNull: false },
    user_id: { type: DataTypes.INTEGER, allowNull: false },
    sku: { type: DataTypes.STRING(20), allowNull: false },
    qty: { type: DataTypes.INTEGER, allowNull: false },
  }, { ...opts, indexes: [{ fields: ['user_id'] }] });
  const Ledger = sequelize.define('ledger', {
    id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: false },
    day: { type: DataTypes.DATEONLY, allowNull: false },
    account: { type: DataTypes.STRING(20), allowNull: false },
    amount: { type: DataTypes.DECIMAL(12, 2), allowNull: false },
  }, opts);
  // No database-level foreign keys (constraints: false): the association is the ORM's.
  Order.hasMany(OrderItem, { foreignKey: 'order_id', as: 'items', constraints: false });
  OrderItem.belongsTo(Order, { foreignKey: 'order_id', constraints: false });
  // Items live with their order (same user_id): an include must join on both keys so that the
  // join stays inside one shard (on order_id alone Shoal cannot tell, and refuses it).
  const items = (extra) => ({
    model: OrderItem,
    as: 'items',
    on: { order_id: { [Op.eq]: sequelize.col('orders.id') }, user_id: { [Op.eq]: sequelize.col('orders.user_id') } },
    ...extra,
  });
  Order.belongsTo(Country, { foreignKey: 'country_code', targetKey: 'code', constraints: false });

  await t.step('authenticate', () => sequelize.authenticate().then(() => 'ok'));
  await t.step('drop tables', async () => {
    for (const name of ['alembic_version', 'order_item', 'orders', 'country', 'ledger']) {
      await sequelize.query(`DROP TABLE IF EXISTS ${name}`);
    }
  });
  await t.step('sync()', () => sequelize.sync().then(() => 'synced'));
  await t.step('raw CREATE TABLE IF NOT EXISTS (whatever sync did)', async () => {
    await sequelize.query('CREATE TABLE IF NOT EXISTS country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL)');
    await sequelize.query('CREATE TABLE IF NOT EXISTS orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, amount DECIMAL(10,2) NOT NULL, country_code CHAR(2), KEY (user_id))');
    await sequelize.query('CREATE TABLE IF NOT EXISTS order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (user_id))');
    await sequelize.query('CREATE TABLE IF NOT EXISTS ledger (id INT NOT NULL PRIMARY KEY, day DATE NOT NULL, account VARCHAR(20) NOT NULL, amount DECIMAL(12,2) NOT NULL)');
  });
  await t.step('sync({ alter: true }) with nothing to change', () => sequelize.sync({ alter: true }).then(() => 'synced'));
  await t.step('describeTable orders', () => sequelize.getQueryInterface().describeTable('orders'));
  await t.step('showAllTables', async () => (await sequelize.getQueryInterface().showAllTables()).sort());

  await t.step('bulkCreate', async () => {
    await Country.bulkCreate(COUNTRIES.map(([code, name]) => ({ code, name })));
    await Order.bulkCreate(ORDERS);
    await OrderItem.bulkCreate(ITEMS);
    await Ledger.bulkCreate(LEDGER);
    return 'created';
  });
  const counts = async () => ({
    country: await Country.count(),
    ledger: await Ledger.count(),
    order_item: await OrderItem.count(),
    orders: await Order.count(),
  });
  await t.step('counts after seed', counts);

  await t.step('findByPk with include', () => Order.findByPk(5, { include: [items({})], order: [[{ model: OrderItem, as: 'items' }, 'id', 'ASC']] }));
  await t.step('findAll where user_id (routed)', () => Order.findAll({ where: { user_id: 3 }, order: [['id', 'ASC']], attributes: ['id', 'status'] }));
  await t.step('update', async () => {
    const [n] = await Order.update({ status: 'done' }, { where: { id: 6 } });
    return [n, (await Order.findByPk(6)).status];
  });
  await t.step('instance save and destroy', async () => {
    const o = await Order.findByPk(7);
    o.amount = '99.99';
    await o.save();
    await OrderItem.destroy({ where: { order_id: 8 } });
    await (await Order.findByPk(8)).destroy();
    return [(await Order.findByPk(7)).amount, await Order.findByPk(8), await OrderItem.count({ where: { order_id: 8 } })];
  });

  await t.step('managed transaction committed', () => sequelize.transaction(async (tx) => {
    await Order.create({ id: 200, user_id: 4, status: 'new', amount: '5.00', country_code: 'de' }, { transaction: tx });
    await OrderItem.create({ id: 2001, order_id: 200, user_id: 4, sku: 'sku-t', qty: 9 }, { transaction: tx });
    await Order.increment({ amount: 1 }, { where: { user_id: 5 }, transaction: tx });
    return 'committed';
  }));
  await t.step('managed transaction rolled back', async () => {
    try {
      await sequelize.transaction(async (tx) => {
        await Order.create({ id: 201, user_id: 5, status: 'new', amount: '6.00' }, { transaction: tx });
        await Ledger.update({ amount: 0 }, { where: { account: 'cash' }, transaction: tx });
        await Country.destroy({ where: { code: 'jp' }, transaction: tx });
        throw new Error('rolled back on purpose');
      });
      return 'not rolled back';
    } catch (e) {
      return e.message;
    }
  });
  await t.step('counts after the transactions', counts);
  await t.step('no trace of the rolled-back one', async () => ({
    order201: await Order.count({ where: { id: 201 } }),
    cash: await Ledger.sum('amount', { where: { account: 'cash' } }),
    jp: await Country.count({ where: { code: 'jp' } }),
  }));
  await t.step('unmanaged transaction rolled back', async () => {
    const tx = await sequelize.transaction();
    await OrderItem.destroy({ where: { user_id: 2 }, transaction: tx });
    const inside = await OrderItem.count({ where: { user_id: 2 }, transaction: tx });
    await tx.rollback();
    return [inside, await OrderItem.count({ where: { user_id: 2 } })];
  });

  await t.step('findAll include items order', () => Order.findAll({
    include: [items({ attributes: ['id', 'sku'] })],
    attributes: ['id', 'user_id'],
    order: [['id', 'ASC'], [{ model: OrderItem, as: 'items' }, 'id', 'ASC']],
  }));
  await t.step('findAll include country (global) where user in', () => Order.findAll({
    include: [{ model: Country, attributes: ['name'] }],
    attributes: ['id'],
    where: { user_id: { [Op.in]: [1, 2, 3] } },
    order: [['id', 'ASC']],
  }));
  await t.step('findAll limit offset', () => Order.findAll({ attributes: ['id'], order: [['amount', 'DESC'], ['id', 'ASC']], limit: 4, offset: 2 }));
  await t.step('findAll include with limit (subquery)', () => Order.findAll({
    include: [items({ attributes: ['id'] })],
    attributes: ['id', 'user_id'],
    where: { user_id: 2 },
    order: [['id', 'ASC'], [{ model: OrderItem, as: 'items' }, 'id', 'ASC']],
    limit: 2,
  }));
  await t.step('aggregate per user', () => Order.findAll({
    attributes: ['user_id', [sequelize.fn('COUNT', sequelize.col('id')), 'n'], [sequelize.fn('SUM', sequelize.col('amount')), 'total']],
    group: ['user_id'],
    order: [['user_id', 'ASC']],
    raw: true,
  }));
  await t.step('count, sum, max', async () => [await Order.count(), await Order.sum('amount'), await Order.max('amount')]);
  await t.step('findAndCountAll', async () => {
    const r = await Order.findAndCountAll({ where: { status: 'paid' }, attributes: ['id'], order: [['id', 'ASC']], limit: 3 });
    return [r.count, r.rows];
  });
  await t.step('ledger per account in 2024', () => Ledger.findAll({
    attributes: ['account', [sequelize.fn('SUM', sequelize.col('amount')), 'total']],
    where: { day: { [Op.between]: ['2024-01-01', '2024-12-31'] } },
    group: ['account'],
    order: [['account', 'ASC']],
    raw: true,
  }));
  await t.step('ledger rows', async () => (await Ledger.findAll({ raw: true })).sort((a, b) => a.id - b.id));
  await t.step('drop', async () => {
    await sequelize.drop();
    return (await sequelize.getQueryInterface().showAllTables()).filter((n) => ['orders', 'order_item', 'country', 'ledger'].includes(n)).sort();
  });
  await sequelize.close();
  t.dump();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
