// The Knex scenario's second migration: a column on the sharded `orders` (DDL on every shard),
// filled for one user's orders.
'use strict';

exports.up = async (knex) => {
  await knex.schema.alterTable('orders', (tb) => {
    tb.string('coupon_code', 12).nullable();
  });
  await knex('orders').where({ user_id: 2 }).update({ coupon_code: 'WELCOME' });
};

exports.down = (knex) => knex.schema.alterTable('orders', (tb) => {
  tb.dropColumn('coupon_code');
});
