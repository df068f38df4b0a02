-- TPC-C (spec rev. 5.11) for Myriad: the nine tables, their indexes, the five transactions
-- as stored procedures (clause 2) and the thesis's StockScan query (Wu 2017, §5.7.1).
--
-- Money is INT cents (w_ytd, d_ytd, c_balance, i_price, ol_amount, h_amount, ...), tax and
-- discount rates are INT basis points (0.1234 is 1234): integers keep the consistency
-- conditions exact and the interpreter on its integer fast path. Dates are INT seconds;
-- a NULL carrier id or delivery date (there is no NULL) is 0.
--
-- The Rust driver (`myriad bench tpcc`) draws every input (NURand ids, names, amounts) and
-- passes it as parameters; `inserts = 0` is the thesis's `--no-inserts` (§4.7.1): no INSERT
-- and no DELETE, everything else unchanged. Run `myriad explain` on this file for the IR.
--
-- Tables read only by whole keys (warehouse, district, customer, history, item, stock) have
-- hash primary keys (`USING HASH`); the others are B-trees because the transactions scan
-- ranges of their keys. StockScan's per-warehouse count of STOCK is then a table scan.

CREATE TABLE warehouse (
  w_id INT, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
  w_city VARCHAR(20), w_state VARCHAR(2), w_zip VARCHAR(9), w_tax INT, w_ytd INT,
  PRIMARY KEY (w_id) USING HASH);
CREATE TABLE district (
  d_w_id INT, d_id INT, d_name VARCHAR(10), d_street_1 VARCHAR(20), d_street_2 VARCHAR(20),
  d_city VARCHAR(20), d_state VARCHAR(2), d_zip VARCHAR(9), d_tax INT, d_ytd INT,
  d_next_o_id INT,
  PRIMARY KEY (d_w_id, d_id) USING HASH);
CREATE TABLE customer (
  c_w_id INT, c_d_id INT, c_id INT, c_first VARCHAR(16), c_middle VARCHAR(2),
  c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),
  c_state VARCHAR(2), c_zip VARCHAR(9), c_phone VARCHAR(16), c_since INT, c_credit VARCHAR(2),
  c_credit_lim INT, c_discount INT, c_balance INT, c_ytd_payment INT, c_payment_cnt INT,
  c_delivery_cnt INT, c_data VARCHAR(500),
  PRIMARY KEY (c_w_id, c_d_id, c_id) USING HASH);
-- Payment and Order-Status by last name: the rows of one name in c_first order.
CREATE INDEX customer_by_name ON customer USING BTREE (c_w_id, c_d_id, c_last, c_first);
-- HISTORY has no key in the spec; h_id is a surrogate the driver makes unique.
CREATE TABLE history (
  h_id INT, h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date INT,
  h_amount INT, h_data VARCHAR(24),
  PRIMARY KEY (h_id) USING HASH);
-- Delivery takes a district's oldest new order: the first key under (w, d).
CREATE TABLE new_order (
  no_w_id INT, no_d_id INT, no_o_id INT,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (
  o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_entry_d INT, o_carrier_id INT,
  o_ol_cnt INT, o_all_local INT,
  PRIMARY KEY (o_w_id, o_d_id, o_id));
-- Order-Status: a customer's latest order.
CREATE INDEX orders_by_customer ON orders USING BTREE (o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE order_line (
  ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT, ol_supply_w_id INT,
  ol_delivery_d INT, ol_quantity INT, ol_amount INT, ol_dist_info VARCHAR(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item (
  i_id INT, i_im_id INT, i_name VARCHAR(24), i_price INT, i_data VARCHAR(50),
  PRIMARY KEY (i_id) USING HASH);
CREATE TABLE stock (
  s_w_id INT, s_i_id INT, s_quantity INT,
  s_dist_01 VARCHAR(24), s_dist_02 VARCHAR(24), s_dist_03 VARCHAR(24), s_dist_04 VARCHAR(24),
  s_dist_05 VARCHAR(24), s_dist_06 VARCHAR(24), s_dist_07 VARCHAR(24), s_dist_08 VARCHAR(24),
  s_dist_09 VARCHAR(24), s_dist_10 VARCHAR(24),
  s_ytd INT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50),
  PRIMARY KEY (s_w_id, s_i_id) USING HASH);

-- Clause 2.4: New-Order. An item id that does not exist (the driver's 1%) rolls the whole
-- transaction back. Returns the order id and the order's total in cents.
CREATE PROCEDURE new_order(w INT, d INT, c INT, entry_d INT, item_ids BIGINT[],
                           supply_w_ids BIGINT[], quantities BIGINT[], all_local INT,
                           inserts INT) AS $$
DECLARE
  x_w_tax INT; x_d_tax INT; x_o_id INT; x_discount INT; x_last VARCHAR(16);
  x_credit VARCHAR(2); x_price INT; x_i_name VARCHAR(24); x_i_data VARCHAR(50);
  x_s_quantity INT; x_dist_info VARCHAR(24); x_remote INT; x_amount INT; x_total INT;
  n INT;
BEGIN
  SELECT w_tax INTO x_w_tax FROM warehouse WHERE w_id = w;
  SELECT d_tax, d_next_o_id INTO x_d_tax, x_o_id FROM district WHERE d_w_id = w AND d_id = d;
  UPDATE district SET d_next_o_id = x_o_id + 1 WHERE d_w_id = w AND d_id = d;
  SELECT c_discount, c_last, c_credit INTO x_discount, x_last, x_credit
    FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
  n := cardinality(item_ids);
  IF inserts = 1 THEN
    INSERT INTO orders VALUES (w, d, x_o_id, c, entry_d, 0, n, all_local);
    INSERT INTO new_order VALUES (w, d, x_o_id);
  END IF;
  FOR i IN 1..n LOOP
    SELECT i_price, i_name, i_data INTO x_price, x_i_name, x_i_data FROM item WHERE i_id = item_ids[i];
    IF NOT found THEN
      RAISE EXCEPTION 'item % not found', item_ids[i];
    END IF;
    IF d = 1 THEN
      SELECT s_quantity, s_dist_01 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 2 THEN
      SELECT s_quantity, s_dist_02 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 3 THEN
      SELECT s_quantity, s_dist_03 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 4 THEN
      SELECT s_quantity, s_dist_04 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 5 THEN
      SELECT s_quantity, s_dist_05 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 6 THEN
      SELECT s_quantity, s_dist_06 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 7 THEN
      SELECT s_quantity, s_dist_07 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 8 THEN
      SELECT s_quantity, s_dist_08 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 9 THEN
      SELECT s_quantity, s_dist_09 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    ELSIF d = 10 THEN
      SELECT s_quantity, s_dist_10 INTO x_s_quantity, x_dist_info FROM stock WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    END IF;
    IF x_s_quantity >= quantities[i] + 10 THEN
      x_s_quantity := x_s_quantity - quantities[i];
    ELSE
      x_s_quantity := x_s_quantity - quantities[i] + 91;
    END IF;
    x_remote := 0;
    IF supply_w_ids[i] <> w THEN
      x_remote := 1;
    END IF;
    UPDATE stock SET s_quantity = x_s_quantity, s_ytd = s_ytd + quantities[i],
                     s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + x_remote
      WHERE s_w_id = supply_w_ids[i] AND s_i_id = item_ids[i];
    x_amount := quantities[i] * x_price;
    x_total := x_total + x_amount;
    IF inserts = 1 THEN
      INSERT INTO order_line VALUES (w, d, x_o_id, i, item_ids[i], supply_w_ids[i], 0,
                                     quantities[i], x_amount, x_dist_info);
    END IF;
  END LOOP;
  RETURN x_o_id, x_total * (10000 - x_discount) * (10000 + x_w_tax + x_d_tax) / 100000000;
END $$;

-- Clause 2.5: Payment. by_name = 1 selects the customer by last name: the row at position
-- ceil(n / 2) of the n rows of that name in c_first order.
CREATE PROCEDURE payment(w INT, d INT, c_w INT, c_d INT, c INT, by_name INT,
                         c_last_name VARCHAR(16), amount INT, h_id INT, h_date INT,
                         inserts INT) AS $$
DECLARE
  x_w_name VARCHAR(10); x_d_name VARCHAR(10); x_c INT; n INT; x_credit VARCHAR(2);
  x_balance INT; x_data VARCHAR(500);
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w;
  SELECT w_name INTO x_w_name FROM warehouse WHERE w_id = w;
  UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d;
  SELECT d_name INTO x_d_name FROM district WHERE d_w_id = w AND d_id = d;
  x_c := c;
  IF by_name = 1 THEN
    SELECT count(*) INTO n FROM customer
      WHERE c_w_id = c_w AND c_d_id = c_d AND c_last = c_last_name;
    IF n = 0 THEN
      RAISE EXCEPTION 'no customer named %', c_last_name;
    END IF;
    FOR r IN SELECT c_id FROM customer
        WHERE c_w_id = c_w AND c_d_id = c_d AND c_last = c_last_name
        ORDER BY c_first LIMIT (n + 1) / 2 LOOP
      x_c := r.c_id;
    END LOOP;
  END IF;
  SELECT c_credit, c_balance INTO x_credit, x_balance FROM customer
    WHERE c_w_id = c_w AND c_d_id = c_d AND c_id = x_c;
  IF x_credit = 'BC' THEN
    SELECT c_data INTO x_data FROM customer WHERE c_w_id = c_w AND c_d_id = c_d AND c_id = x_c;
    UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                        c_payment_cnt = c_payment_cnt + 1,
                        c_data = substring(x_c || ' ' || c_d || ' ' || c_w || ' ' || d || ' ' || w
                                           || ' ' || amount || ' ' || x_data FROM 1 FOR 500)
      WHERE c_w_id = c_w AND c_d_id = c_d AND c_id = x_c;
  ELSE
    UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                        c_payment_cnt = c_payment_cnt + 1
      WHERE c_w_id = c_w AND c_d_id = c_d AND c_id = x_c;
  END IF;
  IF inserts = 1 THEN
    INSERT INTO history VALUES (h_id, x_c, c_d, c_w, d, w, h_date, amount,
                                x_w_name || '    ' || x_d_name);
  END IF;
  RETURN x_c, x_balance - amount;
END $$;

-- Clause 2.6: Order-Status (read-only). Returns the customer, the order and the number and
-- total amount of its lines.
CREATE PROCEDURE order_status(w INT, d INT, c INT, by_name INT, c_last_name VARCHAR(16)) AS $$
DECLARE
  x_c INT; n INT; x_balance INT; x_first VARCHAR(16); x_o_id INT; x_entry_d INT;
  x_carrier INT; lines INT; total INT;
BEGIN
  x_c := c;
  IF by_name = 1 THEN
    SELECT count(*) INTO n FROM customer
      WHERE c_w_id = w AND c_d_id = d AND c_last = c_last_name;
    IF n = 0 THEN
      RAISE EXCEPTION 'no customer named %', c_last_name;
    END IF;
    FOR r IN SELECT c_id FROM customer
        WHERE c_w_id = w AND c_d_id = d AND c_last = c_last_name
        ORDER BY c_first LIMIT (n + 1) / 2 LOOP
      x_c := r.c_id;
    END LOOP;
  END IF;
  SELECT c_balance, c_first INTO x_balance, x_first FROM customer
    WHERE c_w_id = w AND c_d_id = d AND c_id = x_c;
  SELECT o_id, o_entry_d, o_carrier_id INTO x_o_id, x_entry_d, x_carrier FROM orders
    WHERE o_w_id = w AND o_d_id = d AND o_c_id = x_c ORDER BY o_id DESC LIMIT 1;
  FOR r IN SELECT ol_amount FROM order_line
      WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = x_o_id LOOP
    lines := lines + 1;
    total := total + r.ol_amount;
  END LOOP;
  RETURN x_c, x_balance, x_o_id, lines, total;
END $$;

-- Clause 2.7: Delivery, all ten districts in one transaction (the deferred-execution queue
-- of the spec is not modelled). `from_o_ids[d]` is a lower bound on district d's oldest new
-- order that the driver remembers from its last Delivery (as Silo's TPC-C does): a deleted
-- row's index entry stays in the B-tree, so a scan from the district's first key would walk
-- every order ever delivered. Returns the order delivered in each district (0: none).
CREATE PROCEDURE delivery(w INT, carrier INT, delivery_d INT, from_o_ids BIGINT[],
                          inserts INT) AS $$
DECLARE
  x_o_id INT; x_c INT; x_cnt INT; x_amount INT; total INT; done BIGINT[];
BEGIN
  FOR d IN 1..10 LOOP
    x_o_id := 0;
    SELECT no_o_id INTO x_o_id FROM new_order
      WHERE no_w_id = w AND no_d_id = d AND no_o_id >= from_o_ids[d] ORDER BY no_o_id LIMIT 1;
    IF found THEN
      IF inserts = 1 THEN
        DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id = x_o_id;
      END IF;
      SELECT o_c_id, o_ol_cnt INTO x_c, x_cnt FROM orders
        WHERE o_w_id = w AND o_d_id = d AND o_id = x_o_id;
      UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = x_o_id;
      total := 0;
      FOR i IN 1..x_cnt LOOP
        SELECT ol_amount INTO x_amount FROM order_line
          WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = x_o_id AND ol_number = i;
        total := total + x_amount;
        UPDATE order_line SET ol_delivery_d = delivery_d
          WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = x_o_id AND ol_number = i;
      END LOOP;
      UPDATE customer SET c_balance = c_balance + total, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = w AND c_d_id = d AND c_id = x_c;
    END IF;
    done := done || x_o_id;
  END LOOP;
  RETURN done[1], done[2], done[3], done[4], done[5], done[6], done[7], done[8], done[9],
         done[10];
END $$;

-- Clause 2.8: Stock-Level (read-only): distinct items of the district's last 20 orders whose
-- stock is below the threshold.
CREATE PROCEDURE stock_level(w INT, d INT, threshold INT) AS $$
DECLARE
  x_next INT; x_quantity INT; low BIGINT[];
BEGIN
  SELECT d_next_o_id INTO x_next FROM district WHERE d_w_id = w AND d_id = d;
  FOR r IN SELECT ol_i_id FROM order_line
      WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= x_next - 20 AND ol_o_id < x_next LOOP
    SELECT s_quantity INTO x_quantity FROM stock WHERE s_w_id = w AND s_i_id = r.ol_i_id;
    IF x_quantity < threshold AND NOT r.ol_i_id = ANY(low) THEN
      low := low || r.ol_i_id;
    END IF;
  END LOOP;
  RETURN cardinality(low);
END $$;

-- Wu 2017, §5.7.1: StockScan, a long read-only scan of STOCK counting each warehouse's items.
-- Returns the number of stock rows seen.
CREATE PROCEDURE stock_scan(warehouses INT) AS $$
DECLARE
  n INT; total INT;
BEGIN
  FOR w IN 1..warehouses LOOP
    SELECT count(*) INTO n FROM stock WHERE s_w_id = w;
    total := total + n;
  END LOOP;
  RETURN total;
END $$;
