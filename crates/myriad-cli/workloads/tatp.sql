-- TATP, the Telecommunication Application Transaction Processing benchmark (TATP Benchmark
-- Description 1.0, tatpbenchmark.sourceforge.net; Hekaton §5.3): four tables and seven
-- transactions, written as stored procedures. `myriad bench tatp` loads these tables and calls
-- these procedures; `myriad explain crates/myriad-cli/workloads/tatp.sql` shows their IR.
--
-- The spec's expected failures are kept: update_subscriber_data, insert_call_forwarding and
-- delete_call_forwarding RAISE (a user abort, not retried) when their row is missing or, for
-- the insert, already there; the read transactions commit and RETURN how many rows they found.
-- Where the spec reads a key range of a composite primary key, the procedures look up each
-- possible key instead (start_time is one of 0, 8, 16; sf_type one of 1..4): the same rows,
-- through point lookups, which the planner turns into primary-key probes.

CREATE TABLE subscriber (
  s_id BIGINT PRIMARY KEY,
  sub_nbr VARCHAR(15),
  bit_1 INT,
  bit_2 INT,
  bit_3 INT,
  bit_4 INT,
  bit_5 INT,
  bit_6 INT,
  bit_7 INT,
  bit_8 INT,
  bit_9 INT,
  bit_10 INT,
  hex_1 INT,
  hex_2 INT,
  hex_3 INT,
  hex_4 INT,
  hex_5 INT,
  hex_6 INT,
  hex_7 INT,
  hex_8 INT,
  hex_9 INT,
  hex_10 INT,
  byte2_1 INT,
  byte2_2 INT,
  byte2_3 INT,
  byte2_4 INT,
  byte2_5 INT,
  byte2_6 INT,
  byte2_7 INT,
  byte2_8 INT,
  byte2_9 INT,
  byte2_10 INT,
  msc_location BIGINT,
  vlr_location BIGINT
);
-- The spec's second index: sub_nbr, unique.
CREATE UNIQUE INDEX subscriber_sub_nbr ON subscriber USING HASH (sub_nbr);
CREATE TABLE access_info (
  s_id BIGINT, ai_type INT, data1 INT, data2 INT, data3 VARCHAR(3), data4 VARCHAR(5),
  PRIMARY KEY (s_id, ai_type)
);
CREATE TABLE special_facility (
  s_id BIGINT, sf_type INT, is_active INT, error_cntrl INT, data_a INT, data_b VARCHAR(5),
  PRIMARY KEY (s_id, sf_type)
);
CREATE TABLE call_forwarding (
  s_id BIGINT, sf_type INT, start_time INT, end_time INT, numberx VARCHAR(15),
  PRIMARY KEY (s_id, sf_type, start_time)
);

-- 35%: the whole subscriber row.
CREATE PROCEDURE get_subscriber_data(sid BIGINT) AS $$
DECLARE nbr VARCHAR(15); b1 INT; h1 INT; y1 INT; b2 INT; h2 INT; y2 INT; b3 INT; h3 INT; y3 INT; b4 INT; h4 INT; y4 INT; b5 INT; h5 INT; y5 INT; b6 INT; h6 INT; y6 INT; b7 INT; h7 INT; y7 INT; b8 INT; h8 INT; y8 INT; b9 INT; h9 INT; y9 INT; b10 INT; h10 INT; y10 INT; msc BIGINT; vlr BIGINT;
BEGIN
  SELECT sub_nbr, bit_1, bit_2, bit_3, bit_4, bit_5, bit_6, bit_7, bit_8, bit_9, bit_10, hex_1, hex_2, hex_3, hex_4, hex_5, hex_6, hex_7, hex_8, hex_9, hex_10, byte2_1, byte2_2, byte2_3, byte2_4, byte2_5, byte2_6, byte2_7, byte2_8, byte2_9, byte2_10, msc_location, vlr_location
    INTO nbr, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, y1, y2, y3, y4, y5, y6, y7, y8, y9, y10, msc, vlr
    FROM subscriber WHERE s_id = sid;
  IF NOT found THEN RAISE EXCEPTION 'no subscriber %', sid; END IF;
  RETURN 1;
END $$;

-- 10%: the numbers an active special facility forwards to at start_time <= st < et <
-- end_time (the spec's join of special_facility and call_forwarding). Finds a row ~14.8% of
-- the time on the spec's population (its text quotes 23.9%; see src/workload/tatp.rs).
CREATE PROCEDURE get_new_destination(sid BIGINT, sft BIGINT, st BIGINT, et BIGINT) AS $$
DECLARE active INT; t BIGINT; e INT; nx VARCHAR(15); n BIGINT := 0;
BEGIN
  SELECT is_active INTO active FROM special_facility WHERE s_id = sid AND sf_type = sft;
  IF found AND active = 1 THEN
    FOR i IN 0..2 LOOP
      t := i * 8;
      IF t <= st THEN
        SELECT end_time, numberx INTO e, nx FROM call_forwarding
          WHERE s_id = sid AND sf_type = sft AND start_time = t;
        IF found AND et < e THEN n := n + 1; END IF;
      END IF;
    END LOOP;
  END IF;
  RETURN n;
END $$;

-- 35%: one access_info row; finds it 62.5% of the time.
CREATE PROCEDURE get_access_data(sid BIGINT, ait BIGINT) AS $$
DECLARE d1 INT; d2 INT; d3 VARCHAR(3); d4 VARCHAR(5); n BIGINT := 0;
BEGIN
  SELECT data1, data2, data3, data4 INTO d1, d2, d3, d4 FROM access_info
    WHERE s_id = sid AND ai_type = ait;
  IF found THEN n := 1; END IF;
  RETURN n;
END $$;

-- 2%: succeeds when the special facility exists (62.5%).
CREATE PROCEDURE update_subscriber_data(sid BIGINT, bit1 BIGINT, sft BIGINT, da BIGINT) AS $$
BEGIN
  UPDATE subscriber SET bit_1 = bit1 WHERE s_id = sid;
  IF NOT found THEN RAISE EXCEPTION 'no subscriber %', sid; END IF;
  UPDATE special_facility SET data_a = da WHERE s_id = sid AND sf_type = sft;
  IF NOT found THEN RAISE EXCEPTION 'subscriber % has no special facility %', sid, sft; END IF;
  RETURN 1;
END $$;

-- 14%: by sub_nbr, through the secondary index.
CREATE PROCEDURE update_location(nbr VARCHAR(15), loc BIGINT) AS $$
BEGIN
  UPDATE subscriber SET vlr_location = loc WHERE sub_nbr = nbr;
  IF NOT found THEN RAISE EXCEPTION 'no subscriber number %', nbr; END IF;
  RETURN 1;
END $$;

-- 2%: fails when the special facility is missing (the spec's foreign key) or the row exists
-- (its primary key); succeeds ~31.25% of the time on the loaded data.
CREATE PROCEDURE insert_call_forwarding(nbr VARCHAR(15), sft BIGINT, st BIGINT, et BIGINT, numx VARCHAR(15)) AS $$
DECLARE sid BIGINT; active INT; e INT;
BEGIN
  SELECT s_id INTO sid FROM subscriber WHERE sub_nbr = nbr;
  IF NOT found THEN RAISE EXCEPTION 'no subscriber number %', nbr; END IF;
  SELECT is_active INTO active FROM special_facility WHERE s_id = sid AND sf_type = sft;
  IF NOT found THEN RAISE EXCEPTION 'subscriber % has no special facility %', sid, sft; END IF;
  SELECT end_time INTO e FROM call_forwarding
    WHERE s_id = sid AND sf_type = sft AND start_time = st;
  IF found THEN RAISE EXCEPTION 'call forwarding (%, %, %) exists', sid, sft, st; END IF;
  INSERT INTO call_forwarding VALUES (sid, sft, st, et, numx);
  RETURN 1;
END $$;

-- 2%: fails when there is no such row.
CREATE PROCEDURE delete_call_forwarding(nbr VARCHAR(15), sft BIGINT, st BIGINT) AS $$
DECLARE sid BIGINT;
BEGIN
  SELECT s_id INTO sid FROM subscriber WHERE sub_nbr = nbr;
  IF NOT found THEN RAISE EXCEPTION 'no subscriber number %', nbr; END IF;
  DELETE FROM call_forwarding WHERE s_id = sid AND sf_type = sft AND start_time = st;
  IF NOT found THEN RAISE EXCEPTION 'no call forwarding (%, %, %)', sid, sft, st; END IF;
  RETURN 1;
END $$;
