SELECT count(*) FROM orders WHERE region = '{{ var.value.region }}'
