CREATE TABLE IF NOT EXISTS orders (day TEXT, region TEXT, amount INTEGER);
DELETE FROM orders WHERE day = '{{ ds }}';
INSERT INTO orders VALUES ('{{ ds }}', '{{ var.value.region }}', 10), ('{{ ds }}', '{{ var.value.region }}', 32);
