"""Prediction: what a case will cost, and how well past predictions held."""
