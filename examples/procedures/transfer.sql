CREATE PROCEDURE transfer(src_id VARCHAR(16)) AS $$ DECLARE dst_id VARCHAR(16); src_val DOUBLE; dst_val DOUBLE; tmp DOUBLE; bonus INT; BEGIN
  SELECT dst INTO dst_id FROM client WHERE name = src_id;
  SELECT val INTO src_val FROM balance WHERE name = src_id;
  SELECT val INTO dst_val FROM balance WHERE name = dst_id;
  tmp := 0.01 * src_val;
  UPDATE balance SET val = src_val - tmp WHERE name = src_id;
  UPDATE balance SET val = dst_val + tmp WHERE name = dst_id;
  SELECT val INTO bonus FROM bonus WHERE name = src_id;
  UPDATE bonus SET val = bonus + 1 WHERE name = src_id;
END $$;

-- Thesis Fig. 3.1, the bank transfer: statements 2-9 sit on the lines the figure numbers
-- them by, so `myriad explain examples/procedures/bank.sql examples/procedures/transfer.sql`
-- shows the figure's dependencies (Fig. 3.3) by line. The tables are in bank.sql.
