"""tracer lens: the logit lens, each layer's residual stream read out through the final norm and the head."""
