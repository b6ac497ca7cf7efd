"""Callbacks and notifiers: claimed in the loop's transaction, called in processes of their own, outcomes recorded.
"""
