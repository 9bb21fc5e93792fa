-- BUG-07  Enum, domain and composite types, including type names that need quoting
-- (adapted: no slot/peek/drop; the schemas "int" and "Billing" become "@S@_Int" and
-- "@S@_Billing" so that parallel runs do not collide; both names still need quoting)
CREATE SCHEMA "@S@_Int";
CREATE TYPE "@S@_Int".order_state AS ENUM ('new', 'paid', 'it''s "shipped"');
CREATE TYPE "MyType" AS ENUM ('A', 'b');
CREATE DOMAIN positive_amount AS numeric(12,2) CHECK (VALUE > 0);
CREATE TYPE money_pair AS (amount numeric, currency text);
CREATE SCHEMA "@S@_Billing";
CREATE TYPE "@S@_Billing".currency_code AS ENUM ('EUR', 'USD');
CREATE TYPE "we""ird" AS ENUM ('x');

CREATE TABLE "@S@_Int".purchase (
    purchase_id  int PRIMARY KEY,
    state        "@S@_Int".order_state,
    kinds        "MyType"[],
    total        positive_amount,
    pair         money_pair,
    currency     "@S@_Billing".currency_code,
    odd          "we""ird"
);
-- @@ workload
INSERT INTO "@S@_Int".purchase VALUES
 (1, 'new', ARRAY['A','b']::"MyType"[], 10.50, ROW(10.5, 'EUR'), 'EUR', 'x'),
 (2, 'it''s "shipped"', '{}', 0.01, ROW(NULL, 'a "q", b'), NULL, NULL);
