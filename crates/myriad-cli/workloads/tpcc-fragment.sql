-- POMVCC §VII-B (Fig. 21): the part of TPC-C's New-Order that the paper repeats, on the
-- tables of `tpcc.sql` (created first). Per order line: read the ITEM row, read the STOCK
-- row, write its new quantity, insert the ORDER_LINE row; 5 to 15 lines per transaction
-- (10 on average), the lines drawn by the driver as New-Order draws them. Unlike New-Order
-- it touches no WAREHOUSE, DISTRICT or CUSTOMER row and inserts no ORDERS or NEW_ORDER row,
-- so two transactions conflict only on a STOCK row. The driver makes the order id `o`
-- unique per thread (no DISTRICT counter). The paper reads the district's S_DIST_xx column;
-- this reads S_DIST_01 whatever the district (the same row, one column fewer to choose).
CREATE PROCEDURE no_fragment(w INT, d INT, o INT, item_ids BIGINT[], supply_w_ids BIGINT[],
                             quantities BIGINT[], inserts INT) AS $$
DECLARE
  x_price INT; x_i_name VARCHAR(24); x_i_data VARCHAR(50); x_s_quantity INT;
  x_s_data VARCHAR(50); x_dist_info VARCHAR(24); x_amount INT; x_total INT; n INT;
BEGIN
  n := cardinality(item_ids);
  x_total := 0;
  FOR i IN 1..n LOOP
    SELECT i_price, i_name, i_data INTO x_price, x_i_name, x_i_data FROM item WHERE i_id = item_ids[i];
    SELECT s_quantity, s_data, s_dist_01 INTO x_s_quantity, x_s_data, x_dist_info
      FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    IF x_s_quantity >= quantities[i] + 10 THEN
      x_s_quantity := x_s_quantity - quantities[i];
    ELSE
      x_s_quantity := x_s_quantity - quantities[i] + 91;
    END IF;
    UPDATE stock SET s_quantity = x_s_quantity
      WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    x_amount := quantities[i] * x_price;
    x_total := x_total + x_amount;
    IF inserts = 1 THEN
      INSERT INTO order_line VALUES (w, d, o, i, item_ids[i], supply_w_ids[i], 0,
                                     quantities[i], x_amount, x_dist_info);
    END IF;
  END LOOP;
  RETURN x_total;
END $$;
