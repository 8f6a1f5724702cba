"""Code behind the python-backend models in model_repository/.

Each model's ``model.py`` is a one-line import of a class from here, so there is
one implementation per model family and one shared base (``base.PythonModel``).
Runs on Python 3.10 (the official 24.10 container) and newer.
"""
