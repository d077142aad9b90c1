-- A 4-way scatter aggregate on the sharded target: SELECT COUNT(*) over a whole sysbench table,
-- as a prepared statement (sysbench --db-ps-mode=auto), one query per event. On an unsharded
-- target it is the same statement on one table.
require("oltp_common")

function prepare_statements()
   for t = 1, sysbench.opt.tables do
      stmt[t].scatter = con:prepare(string.format("SELECT COUNT(*) FROM sbtest%d", t))
   end
end

function event()
   stmt[sysbench.rand.uniform(1, sysbench.opt.tables)].scatter:execute()
end
