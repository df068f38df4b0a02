-- Smallbank (Alomari, Cahill, Fekete, Röhm, "The cost of serializability on platforms that
-- use snapshot isolation", ICDE 2008), as H-Store and OLTPBench run it: three tables keyed by
-- customer id and six stored procedures. `myriad bench smallbank` loads these tables and calls
-- these procedures; `myriad explain crates/myriad-cli/workloads/smallbank.sql` shows their IR.
--
-- Money is in cents (BIGINT), so totals add up exactly. Every procedure that can change the
-- total RETURNs its net change (balance returns the customer's total instead); the benchmark
-- adds up the returns of committed calls and compares them with the table totals (`--check`).
-- Customers are looked up by id, as DBx1000 and Cavalia do (OLTPBench looks some up by name).
-- An unknown customer, a negative deposit, a payment the checking balance cannot cover and a
-- withdrawal that would make savings negative RAISE: the call is a user abort, as in the
-- original, and is not retried.

CREATE TABLE accounts (custid BIGINT PRIMARY KEY, name VARCHAR(64));
CREATE TABLE savings (custid BIGINT PRIMARY KEY, bal BIGINT);
CREATE TABLE checking (custid BIGINT PRIMARY KEY, bal BIGINT);

-- Moves all of c0's money (savings and checking) into c1's checking account. (OLTPBench's
-- version zeroes c0's checking but credits c1's savings with c0's savings plus c1's
-- checking, which does not conserve money; this is the original definition.)
CREATE PROCEDURE amalgamate(c0 BIGINT, c1 BIGINT) AS $$
DECLARE id BIGINT; s BIGINT; c BIGINT;
BEGIN
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  SELECT custid INTO id FROM accounts WHERE custid = c1;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c1; END IF;
  SELECT bal INTO s FROM savings WHERE custid = c0;
  SELECT bal INTO c FROM checking WHERE custid = c0;
  UPDATE savings SET bal = 0 WHERE custid = c0;
  UPDATE checking SET bal = 0 WHERE custid = c0;
  UPDATE checking SET bal = bal + s + c WHERE custid = c1;
  RETURN 0;
END $$;

-- The customer's total balance (read-only).
CREATE PROCEDURE balance(c0 BIGINT) AS $$
DECLARE id BIGINT; s BIGINT; c BIGINT;
BEGIN
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  SELECT bal INTO s FROM savings WHERE custid = c0;
  SELECT bal INTO c FROM checking WHERE custid = c0;
  RETURN s + c;
END $$;

-- Deposits v into the checking account.
CREATE PROCEDURE deposit_checking(c0 BIGINT, v BIGINT) AS $$
DECLARE id BIGINT;
BEGIN
  IF v < 0 THEN RAISE EXCEPTION 'negative deposit %', v; END IF;
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  UPDATE checking SET bal = bal + v WHERE custid = c0;
  RETURN v;
END $$;

-- Pays v from c0's checking account into c1's.
CREATE PROCEDURE send_payment(c0 BIGINT, c1 BIGINT, v BIGINT) AS $$
DECLARE id BIGINT; b BIGINT;
BEGIN
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  SELECT custid INTO id FROM accounts WHERE custid = c1;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c1; END IF;
  SELECT bal INTO b FROM checking WHERE custid = c0;
  IF b < v THEN RAISE EXCEPTION 'customer % cannot pay %', c0, v; END IF;
  UPDATE checking SET bal = bal - v WHERE custid = c0;
  UPDATE checking SET bal = bal + v WHERE custid = c1;
  RETURN 0;
END $$;

-- Deposits v into the savings account (v < 0 withdraws), unless that would make the balance
-- negative.
CREATE PROCEDURE transact_savings(c0 BIGINT, v BIGINT) AS $$
DECLARE id BIGINT; b BIGINT;
BEGIN
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  SELECT bal INTO b FROM savings WHERE custid = c0;
  IF b + v < 0 THEN RAISE EXCEPTION 'savings of customer % cannot take %', c0, v; END IF;
  UPDATE savings SET bal = bal + v WHERE custid = c0;
  RETURN v;
END $$;

-- Cashes a check of v against the checking account; when savings and checking together
-- cannot cover it, the account is overdrawn with a penalty of one dollar.
CREATE PROCEDURE write_check(c0 BIGINT, v BIGINT) AS $$
DECLARE id BIGINT; s BIGINT; c BIGINT; d BIGINT;
BEGIN
  SELECT custid INTO id FROM accounts WHERE custid = c0;
  IF NOT found THEN RAISE EXCEPTION 'no customer %', c0; END IF;
  SELECT bal INTO s FROM savings WHERE custid = c0;
  SELECT bal INTO c FROM checking WHERE custid = c0;
  IF s + c < v THEN
    d := v + 100;
  ELSE
    d := v;
  END IF;
  UPDATE checking SET bal = bal - d WHERE custid = c0;
  RETURN 0 - d;
END $$;
