-- Compatibility batch for the mariadb command-line client.
--
-- Run against an EMPTY database named on the command line, once directly and once
-- through Sluice, and compare standard output and standard error byte for byte:
--
--   mariadb --batch --force --show-warnings -h HOST -P PORT -u USER -pPASS DB < compat.sql
--
-- Errors in this file are deliberate: with --force the client reports them (on standard
-- error, with the line number) and goes on. Every SELECT that returns several rows has an
-- ORDER BY, and nothing depends on time, ids or the database name.

-- ---------------------------------------------------------------------------------------
-- DDL: one column of every common type
-- ---------------------------------------------------------------------------------------
CREATE TABLE t_types (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, bi BIGINT, bu BIGINT UNSIGNED,
  de DECIMAL(20,6), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), tm TIME(3), ts TIMESTAMP NULL DEFAULT NULL, yr YEAR,
  ch CHAR(8), vc VARCHAR(64) CHARACTER SET utf8mb4, tx TEXT CHARACTER SET utf8mb4,
  bl BLOB, vb VARBINARY(16),
  js JSON,
  bt BIT(8),
  en ENUM('small', 'medium', 'large'),
  st SET('r', 'g', 'b'),
  g GEOMETRY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE t_rows (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  k VARCHAR(16) NOT NULL UNIQUE,
  n INT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

CREATE TABLE t_big (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB;

SET NAMES utf8mb4;
SET time_zone = '+00:00';

SHOW CREATE TABLE t_rows;

SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_types'
ORDER BY ORDINAL_POSITION;

-- ---------------------------------------------------------------------------------------
-- INSERT, including NULLs, extremes and non-ASCII text
-- ---------------------------------------------------------------------------------------
INSERT INTO t_types VALUES
  (1, 127, 65535, -8388608, -2147483648, 9223372036854775807, 18446744073709551615,
   12345678901234.123456, 1.5, 2.718281828459045,
   '2024-02-29', '2024-02-29 23:59:59.999999', '-12:34:56.789', '2024-03-01 00:00:00', 2024,
   'abc', 'Grüße, мир, 世界 🦀', 'tab\there, newline\nthere', x'00ff10', x'cafe',
   '{"k": [1, 2.5, "three", null, true]}', b'11110000', 'medium', 'r,b',
   ST_GeomFromText('POINT(1 2)')),
  (2, -128, 0, 8388607, 2147483647, -9223372036854775808, 0,
   -0.000001, -0.0, 1e-300,
   '1000-01-01', '1000-01-01 00:00:00.000001', '838:59:59', '1970-01-01 00:00:01', 1901,
   '', '', '', x'', x'',
   '{}', b'00000000', 'small', '',
   ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)')),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

SELECT id, ti, si, mi, i, bi, bu, de, f, d FROM t_types ORDER BY id;
SELECT id, dt, dtm, tm, ts, UNIX_TIMESTAMP(ts), yr FROM t_types ORDER BY id;
SELECT id, ch, vc, CHAR_LENGTH(vc), LENGTH(vc), HEX(vc), tx FROM t_types ORDER BY id;
SELECT id, HEX(bl), HEX(vb), LENGTH(bl) FROM t_types ORDER BY id;
SELECT id, js, JSON_EXTRACT(js, '$.k[1]'), JSON_TYPE(js), JSON_LENGTH(js) FROM t_types ORDER BY id;
SELECT id, bt + 0, BIN(bt), en, en + 0, st, st + 0, ST_AsText(g), ST_GeometryType(g)
FROM t_types ORDER BY id;
SELECT id, id IS NULL, ti IS NULL, COALESCE(vc, 'was null') FROM t_types ORDER BY id;

-- Literals and expressions without a table.
SELECT 1 + 1 AS two, 'x' AS s, NULL AS n, 1.50 AS dec_lit, 2.5e0 AS dbl_lit,
       CAST(18446744073709551615 AS UNSIGNED) AS umax, X'414243' AS hex_lit,
       CAST('2001-02-03 04:05:06.789' AS DATETIME(3)) AS dtm, 'it''s' AS quoted,
       'back\\slash' AS backslash, _utf8mb4'ünï' AS intro, CONCAT('a', NULL) AS null_concat;

-- ---------------------------------------------------------------------------------------
-- A 20 MiB BLOB built on the server: only its length and digest cross the wire, since
-- the client's own max_allowed_packet is 16M. REPEAT gives NULL and a warning when the
-- server's max_allowed_packet is below 20M; either way the output is deterministic.
-- ---------------------------------------------------------------------------------------
INSERT INTO t_big VALUES (1, REPEAT('x', 20 * 1024 * 1024));
INSERT INTO t_big SELECT 2, CONCAT(b, 'tail') FROM t_big WHERE id = 1;
SELECT id, LENGTH(b), SHA1(b), LEFT(b, 3), RIGHT(b, 5) FROM t_big ORDER BY id;
SELECT id, LENGTH(b) FROM t_big WHERE b LIKE '%tail' ORDER BY id;

-- ---------------------------------------------------------------------------------------
-- UPDATE and DELETE with affected-row counts
-- ---------------------------------------------------------------------------------------
INSERT INTO t_rows (k, n) VALUES ('a', 1), ('b', 2), ('c', 3), ('d', 4), ('e', 5);
SELECT ROW_COUNT(), LAST_INSERT_ID();
UPDATE t_rows SET n = n * 10 WHERE n >= 3;
SELECT ROW_COUNT();
UPDATE t_rows SET n = n WHERE k = 'a';
SELECT ROW_COUNT();
DELETE FROM t_rows WHERE k = 'e';
SELECT ROW_COUNT();
INSERT INTO t_rows (k, n) VALUES ('a', 100) ON DUPLICATE KEY UPDATE n = VALUES(n);
SELECT ROW_COUNT();
REPLACE INTO t_rows (id, k, n) VALUES (2, 'b', 20);
SELECT ROW_COUNT();
SELECT id, k, n FROM t_rows ORDER BY id;

-- ---------------------------------------------------------------------------------------
-- Transactions and savepoints
-- ---------------------------------------------------------------------------------------
BEGIN;
INSERT INTO t_rows (k, n) VALUES ('tx1', 1);
SELECT @@in_transaction;
COMMIT;
SELECT @@in_transaction;

START TRANSACTION;
INSERT INTO t_rows (k, n) VALUES ('tx2', 2);
UPDATE t_rows SET n = -1 WHERE k = 'a';
SELECT k, n FROM t_rows WHERE k IN ('a', 'tx2') ORDER BY k;
ROLLBACK;
SELECT k, n FROM t_rows WHERE k IN ('a', 'tx2') ORDER BY k;

BEGIN;
INSERT INTO t_rows (k, n) VALUES ('sp1', 1);
SAVEPOINT first_point;
INSERT INTO t_rows (k, n) VALUES ('sp2', 2);
SAVEPOINT second_point;
INSERT INTO t_rows (k, n) VALUES ('sp3', 3);
ROLLBACK TO SAVEPOINT second_point;
RELEASE SAVEPOINT first_point;
COMMIT;
SELECT k, n FROM t_rows WHERE k LIKE 'sp%' ORDER BY k;

SET autocommit = 0;
INSERT INTO t_rows (k, n) VALUES ('ac0', 0);
ROLLBACK;
SELECT COUNT(*) FROM t_rows WHERE k = 'ac0';
SET autocommit = 1;
SELECT @@autocommit;

-- ---------------------------------------------------------------------------------------
-- Several statements on one line: the client splits them and sends each on its own
-- ---------------------------------------------------------------------------------------
SELECT 'one' AS first; SELECT 'two' AS second; UPDATE t_rows SET n = n + 1 WHERE k = 'a'; SELECT ROW_COUNT();

-- ---------------------------------------------------------------------------------------
-- Stored procedure with two result sets; a multi-statement sent as one query
-- ---------------------------------------------------------------------------------------
DELIMITER //
CREATE PROCEDURE p_two(IN lim INT)
BEGIN
  SELECT lim AS limit_given, 'first result' AS which;
  SELECT id, k, n FROM t_rows WHERE id <= lim ORDER BY id;
END //
CREATE FUNCTION f_double(x INT) RETURNS INT DETERMINISTIC
BEGIN
  RETURN x * 2;
END //
-- With a different delimiter, this whole line is one COM_QUERY holding three statements.
SELECT 'multi 1' AS m1; SELECT 'multi 2' AS m2; SELECT COUNT(*) AS rows_now FROM t_rows //
DELIMITER ;

CALL p_two(3);
CALL p_two(0);
SELECT f_double(21), f_double(NULL);
SELECT 'after call' AS still_in_step;

-- ---------------------------------------------------------------------------------------
-- Errors must come back unchanged, and the session must go on after each
-- ---------------------------------------------------------------------------------------
INSERT INTO t_rows (k, n) VALUES ('a', 0);
INSERT INTO t_rows (id, k, n) VALUES (1, 'zz', 0);
SELEC 1;
SELECT * FROM t_missing;
SELECT no_such_column FROM t_rows;
INSERT INTO t_rows (k, n) VALUES ('much too long for the column', 0);
INSERT INTO t_rows (k, n) VALUES ('divzero', 1 / 0);
CALL p_missing();
SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'raised on purpose', MYSQL_ERRNO = 1644;
SELECT COUNT(*) AS rows_after_errors FROM t_rows;

-- ---------------------------------------------------------------------------------------
-- Warnings
-- ---------------------------------------------------------------------------------------
SELECT 1 / 0 AS division;
SHOW WARNINGS;
SELECT CAST('12abc' AS SIGNED) AS truncated, CAST('x' AS DOUBLE) AS not_a_number;
SHOW COUNT(*) WARNINGS;
INSERT IGNORE INTO t_rows (k, n) VALUES ('a', 1), ('ignored too long key', 2);
SHOW WARNINGS;
DROP TABLE IF EXISTS t_never_existed;
SELECT @@warning_count;

-- ---------------------------------------------------------------------------------------
-- Prepared statements in SQL
-- ---------------------------------------------------------------------------------------
PREPARE s_sum FROM 'SELECT ? + ? AS total, ? AS label';
SET @a = 40, @b = 2, @l = 'answer';
EXECUTE s_sum USING @a, @b, @l;
SET @a = 1.5, @b = NULL, @l = NULL;
EXECUTE s_sum USING @a, @b, @l;
PREPARE s_rows FROM 'SELECT k, n FROM t_rows WHERE n > ? ORDER BY k';
SET @min = 10;
EXECUTE s_rows USING @min;
PREPARE s_ins FROM 'INSERT INTO t_rows (k, n) VALUES (?, ?)';
SET @k = 'prep', @n = 7;
EXECUTE s_ins USING @k, @n;
SELECT ROW_COUNT();
EXECUTE s_ins USING @k, @n;
DEALLOCATE PREPARE s_sum;
DEALLOCATE PREPARE s_rows;
DEALLOCATE PREPARE s_ins;
EXECUTE s_sum USING @a, @b, @l;

-- ---------------------------------------------------------------------------------------
-- Session state
-- ---------------------------------------------------------------------------------------
SET @user_var = 'kept';
SELECT @user_var;
SET SESSION sql_mode = 'ANSI_QUOTES';
SELECT "k" FROM t_rows WHERE "k" = 'a';
SET SESSION sql_mode = DEFAULT;
SELECT DATABASE() IS NOT NULL AS has_database, @@time_zone;

-- ---------------------------------------------------------------------------------------
-- Clean up, so the database is empty again
-- ---------------------------------------------------------------------------------------
DROP PROCEDURE p_two;
DROP FUNCTION f_double;
DROP TABLE t_types, t_rows, t_big;
SELECT COUNT(*) AS tables_left FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE();
