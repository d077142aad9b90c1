// The Knex scenario's first migration: a new table, unlisted in the layout (so it lives in the
// schema's default datanode), with seed rows.
'use strict';

exports.up = async (knex) => {
  await knex.schema.createTable('coupon', (tb) => {
    tb.string('code', 12).primary();
    tb.decimal('discount', 5, 2).notNullable();
    tb.date('valid_until');
  });
  await knex('coupon').insert([
    { code: 'WELCOME', discount: '5.00', valid_until: '2025-12-31' },
    { code: 'SPRING', discount: '12.50', valid_until: null },
  ]);
};

exports.down = (knex) => knex.schema.dropTable('coupon');
