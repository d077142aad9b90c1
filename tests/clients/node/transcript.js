// What every Node client program of the suite shares: where to connect, and a transcript of
// every observable answer, printed as canonical JSON (one step a line) so that the Rust test
// can compare the run against Shoal with the run against one plain MariaDB.
//
// Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB (environment),
// or --host/--port/--user/--password/--db arguments.
'use strict';

function connection() {
  const out = {};
  for (const name of ['host', 'port', 'user', 'password', 'db']) {
    const i = process.argv.indexOf(`--${name}`);
    out[name] = i >= 0 ? process.argv[i + 1] : process.env[`CLIENT_${name.toUpperCase()}`];
    if (out[name] === undefined) {
      console.error(`missing connection setting: ${name}`);
      process.exit(2);
    }
  }
  out.port = Number(out.port);
  return out;
}

// A JSON value that prints the same whatever server produced it (keys sorted).
function plain(value) {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'object') {
    if (typeof value.get === 'function' && value.dataValues) return plain(value.get({ plain: true }));
    const out = {};
    for (const k of Object.keys(value).sort()) out[k] = plain(value[k]);
    return out;
  }
  return value;
}

// `ERROR <code>: <message>` of a server error however a library wraps it.
function describeError(e) {
  const orig = e.original || e.parent || e;
  if (orig.errno && orig.sqlMessage) return `ERROR ${orig.errno}: ${orig.sqlMessage}`;
  return `${e.name || 'Error'}: ${e.message}`;
}

// Steps in order, each with its answer or the error it ended with; a failed step does not
// stop the scenario, so that one run shows every step that differs.
class Transcript {
  constructor() {
    this.steps = [];
  }

  async step(name, fn) {
    let result;
    try {
      result = plain(await fn());
    } catch (e) {
      result = { error: describeError(e) };
    }
    this.steps.push({ result, step: name });
    return result;
  }

  dump() {
    const lines = this.steps.map((s) => JSON.stringify({ result: s.result, step: s.step }));
    process.stdout.write(`[\n${lines.join(',\n')}\n]\n`);
  }
}

// The demo-like rows, the same as tests/clients/python/models.py: 3 countries, 16 orders of 8
// users with two items each, 18 ledger rows over every quarter of 2024-2025 and two before.
const COUNTRIES = [['de', 'Germany'], ['fr', 'France'], ['jp', 'Japan']];
const ORDERS = [];
const ITEMS = [];
for (let i = 1; i <= 16; i++) {
  ORDERS.push({
    id: i,
    user_id: (i % 8) + 1,
    status: ['new', 'paid', 'sent'][i % 3],
    amount: `${(i * 37) % 100}.${i % 10}0`,
    country_code: COUNTRIES[i % 3][0],
  });
  for (const k of [1, 2]) {
    ITEMS.push({ id: i * 10 + k, order_id: i, user_id: (i % 8) + 1, sku: `sku-${(i * 7 + k) % 5}`, qty: k + (i % 4) });
  }
}
const LEDGER = [];
for (let q = 0; q < 8; q++) {
  for (const h of [0, 1]) {
    const month = String((q % 4) * 3 + 1).padStart(2, '0');
    LEDGER.push({
      id: LEDGER.length + 1,
      day: `${2024 + Math.floor(q / 4)}-${month}-${10 + h}`,
      account: ['cash', 'bank'][h],
      amount: `${q * 10 + h}.50`,
    });
  }
}
LEDGER.push({ id: 17, day: '2023-06-01', account: 'cash', amount: '1.00' });
LEDGER.push({ id: 18, day: '2023-12-31', account: 'bank', amount: '2.00' });

module.exports = { connection, Transcript, COUNTRIES, ORDERS, ITEMS, LEDGER };
