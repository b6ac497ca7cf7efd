SELECT count(*) FROM orders WHERE day = '{{ ds }}' AND key = '{{ task_instance_key_str }}'
