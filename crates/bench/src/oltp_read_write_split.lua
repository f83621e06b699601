#!/usr/bin/env sysbench
-- Sluice: the read-write workload of the published caching-proxy report. Each event runs
-- the reads of sysbench's oltp_read_write outside any transaction (so a caching proxy may
-- answer them), then its writes inside one BEGIN ... COMMIT (so they stay atomic and
-- reach the database). With the default options that is 14 reads and 4 writes per event.
--
-- `sluice bench` writes this file next to its results and runs it as
--   sysbench oltp_read_write_split.lua --db-driver=mysql ... run
-- Tables, options and prepare/cleanup are sysbench's own (oltp_common.lua), so data
-- prepared for oltp_read_only serves this workload too. --skip_trx is ignored.

require("oltp_common")

function prepare_statements()
   prepare_begin()
   prepare_commit()

   prepare_point_selects()

   if sysbench.opt.range_selects then
      prepare_simple_ranges()
      prepare_sum_ranges()
      prepare_order_ranges()
      prepare_distinct_ranges()
   end

   prepare_index_updates()
   prepare_non_index_updates()
   prepare_delete_inserts()
end

function event()
   execute_point_selects()

   if sysbench.opt.range_selects then
      execute_simple_ranges()
      execute_sum_ranges()
      execute_order_ranges()
      execute_distinct_ranges()
   end

   begin()
   execute_index_updates()
   execute_non_index_updates()
   execute_delete_inserts()
   commit()
end
