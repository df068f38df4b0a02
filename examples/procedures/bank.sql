-- The tables of thesis Fig. 3.1b (the bank-transfer example) with its initial state.
CREATE TABLE client (name VARCHAR(16) PRIMARY KEY, dst VARCHAR(16));
CREATE TABLE balance (name VARCHAR(16) PRIMARY KEY, val DOUBLE);
CREATE TABLE bonus (name VARCHAR(16) PRIMARY KEY, val INT);
INSERT INTO client VALUES ('Amy', 'Dan'), ('Dan', 'Amy');
INSERT INTO balance VALUES ('Amy', 2000), ('Dan', 1200);
INSERT INTO bonus VALUES ('Amy', 18), ('Dan', 7);
