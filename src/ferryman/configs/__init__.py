"""Pure translation from validated resources to the NGINX model and its text."""
