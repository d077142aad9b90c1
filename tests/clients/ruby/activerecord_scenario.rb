# ActiveRecord 6.1 (Debian's ruby-activerecord, mysql2 adapter from ruby-mysql2) against the
# demo-like schema: the tables created with raw SQL, rows inserted through models, then the
# shapes issue 49 names: `eager_load` (one LEFT OUTER JOIN of orders and their items, joined on
# `order_item.order_id = orders.id` alone, not on the shard key), `eager_load` with `limit`
# (ActiveRecord first selects the page's DISTINCT ids over the join), `joins` with a condition
# on the child, `includes` + `references`, and `where(id: subquery)`. Prints the transcript of
# every answer as JSON, one step a line (tests/tests/clients.rs compares it with one MariaDB's).
#
# Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB.

require "json"
require "bigdecimal"
require "active_record"

# Library warnings go to stderr: stdout carries the transcript alone.
$stdout.sync = true
ActiveRecord::Base.logger = nil

def setting(name)
  v = ENV["CLIENT_#{name.upcase}"]
  abort "missing connection setting: #{name}" if v.nil?
  v
end

ActiveRecord::Base.establish_connection(
  adapter: "mysql2",
  host: setting("host"),
  port: setting("port").to_i,
  username: setting("user"),
  password: setting("password"),
  database: setting("db"),
  # What `rails new --database=mysql` writes into config/database.yml (the mysql2 gem alone
  # would connect in utf8, i.e. utf8mb3).
  encoding: "utf8mb4",
  pool: 2,
)

class Order < ActiveRecord::Base
  self.table_name = "orders"
  has_many :items, class_name: "OrderItem", foreign_key: :order_id
end

class OrderItem < ActiveRecord::Base
  self.table_name = "order_item"
  belongs_to :order, foreign_key: :order_id
end

# A JSON value that prints the same whatever server produced it.
def plain(v)
  case v
  when nil then nil
  when Array then v.map { |x| plain(x) }
  when Hash then v.keys.map(&:to_s).sort.to_h { |k| [k, plain(v[k] || v[k.to_sym])] }
  when BigDecimal then v.to_s("F")
  when ActiveRecord::Base then plain(v.attributes)
  else v
  end
end

# An order with its items, the items sorted by id (a relation's rows come in no fixed order).
def with_items(orders)
  orders.map { |o| plain(o.attributes).merge("items" => o.items.sort_by(&:id).map { |i| plain(i.attributes) }) }
end

STEPS = []

def step(name)
  result = begin
    plain(yield)
  rescue StandardError => e
    cause = e.respond_to?(:cause) && e.cause ? e.cause : e
    if cause.respond_to?(:error_number)
      { "error" => "ERROR #{cause.error_number}: #{cause.message}" }
    else
      { "error" => "#{e.class}: #{e.message}" }
    end
  end
  STEPS << { "result" => result, "step" => name }
end

# The demo-like rows of tests/clients/node/transcript.js: 16 orders of 8 users, two items each.
ORDERS = (1..16).map do |i|
  { id: i, user_id: (i % 8) + 1, status: %w[new paid sent][i % 3],
    amount: "#{(i * 37) % 100}.#{i % 10}0", country_code: %w[de fr jp][i % 3] }
end
ITEMS = (1..16).flat_map do |i|
  [1, 2].map { |k| { id: i * 10 + k, order_id: i, user_id: (i % 8) + 1, sku: "sku-#{(i * 7 + k) % 5}", qty: k + (i % 4) } }
end

c = ActiveRecord::Base.connection
step("connect") { c.select_value("SELECT 1").to_i }
step("create tables") do
  %w[order_item orders].each { |t| c.execute("DROP TABLE IF EXISTS #{t}") }
  c.execute("CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, amount DECIMAL(10,2) NOT NULL, country_code CHAR(2), KEY (user_id))")
  c.execute("CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (user_id))")
  "ok"
end
step("insert orders and items") do
  ORDERS.each { |o| Order.create!(o) }
  ITEMS.each { |i| OrderItem.create!(i) }
  [Order.count, OrderItem.count]
end
step("eager_load") { with_items(Order.eager_load(:items).where(status: "paid").order(:id).to_a) }
step("eager_load with limit and offset") { with_items(Order.eager_load(:items).order(:id).limit(3).offset(2).to_a) }
step("eager_load with limit, one user") { with_items(Order.eager_load(:items).where(user_id: 3).order(:id).limit(1).to_a) }
step("joins with a condition on the child") do
  Order.joins(:items).where(order_item: { sku: "sku-2" }).order("orders.id", "order_item.id").pluck("orders.id", "order_item.id")
end
step("joins, distinct, count") { Order.joins(:items).where("order_item.qty > ?", 3).distinct.count }
step("includes + references, ordered by the child") do
  with_items(Order.includes(:items).references(:items).where("order_item.qty >= ?", 4).order("orders.id").to_a)
end
step("where id in a subquery") do
  Order.where(id: OrderItem.where("qty > ?", 4).select(:order_id)).order(:id).pluck(:id)
end
step("group and count through the join") do
  Order.joins(:items).group("orders.status").order("orders.status").count("order_item.id")
end

puts "["
puts STEPS.map { |s| JSON.generate(s) }.join(",\n")
puts "]"
