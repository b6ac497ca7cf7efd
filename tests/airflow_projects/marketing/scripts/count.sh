#!/bin/bash
echo "campaigns of {{ ds }}: {{ params.campaigns }}"
