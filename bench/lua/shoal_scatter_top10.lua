-- A scattered top-N page: the 10 rows from a random k onwards, in (k, id) order, as a prepared
-- statement, one query per event. The tables are sharded by id, so every shard answers its own
-- 10 rows from the k index and the proxy merges them (ORDER BY k-way merge, then LIMIT 10).
require("oltp_common")

function prepare_statements()
   for t = 1, sysbench.opt.tables do
      stmt[t].scatter = con:prepare(string.format(
         "SELECT id, k, c FROM sbtest%d WHERE k >= ? ORDER BY k, id LIMIT 10", t))
      param[t].scatter = {stmt[t].scatter:bind_create(sysbench.sql.type.INT)}
      stmt[t].scatter:bind_param(unpack(param[t].scatter))
   end
end

function event()
   local t = sysbench.rand.uniform(1, sysbench.opt.tables)
   param[t].scatter[1]:set(sysbench.rand.default(1, sysbench.opt.table_size))
   stmt[t].scatter:execute()
end
