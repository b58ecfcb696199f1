"""Policies as other kinds' translations read them."""
