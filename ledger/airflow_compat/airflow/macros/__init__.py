"""`airflow.macros`."""

import json
import random
import time
import uuid
from datetime import datetime, timedelta

from ledger.sdk.templates import datetime_diff_for_humans, ds_add, ds_format

__all__ = [
    "datetime",
    "datetime_diff_for_humans",
    "ds_add",
    "ds_format",
    "json",
    "random",
    "time",
    "timedelta",
    "uuid",
]
