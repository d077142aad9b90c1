"""The Django app of the client suite's Django scenario (tests/clients/python/django_scenario.py):
unmanaged models over the demo-like tables that tests/clients/python/models.py creates."""
