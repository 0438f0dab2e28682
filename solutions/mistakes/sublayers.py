"""Known mistakes in sublayers.py, each as edits of solutions/sublayers.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="adds_norm_x",
        why="Adds the normalised input back, norm(x) + dropout(sublayer(norm(x))), instead of x itself.",
        diagnosis=("ResidualConnection adds norm(x) back: the residual adds the input itself, x + "
                   "dropout(sublayer(norm(x)))."),
        edits=(
            (
                "return x + self.dropout(sublayer(self.norm(x)))",
                "return self.norm(x) + self.dropout(sublayer(self.norm(x)))",
            ),
        ),
    ),
    Mistake(
        name="dropout_after_w2",
        why="The feed-forward drops its output, dropout(w2(relu(w1(x)))), instead of the hidden activations.",
        diagnosis="FeedForward drops its output: apply dropout to the hidden activations, w2(dropout(relu(w1(x)))).",
        edits=(
            ("h = self.dropout(torch.relu(self.w1(x)))", "h = torch.relu(self.w1(x))"),
            ("return self.w2(h)", "return self.dropout(self.w2(h))"),
        ),
    ),
    Mistake(
        name="dropout_before_sublayer",
        why="Applies dropout to the sublayer's input, x + sublayer(dropout(norm(x))), not to its output.",
        diagnosis=("ResidualConnection applies dropout before the sublayer: apply it to the sublayer's output, x "
                   "+ dropout(sublayer(norm(x)))."),
        edits=(("self.dropout(sublayer(self.norm(x)))", "sublayer(self.dropout(self.norm(x)))"),),
    ),
    Mistake(
        name="layer_norm_over_positions",
        why="Normalises each feature over the positions (dim -2) instead of over d_model (dim -1).",
        diagnosis=("the layer norm runs over the positions: normalise over the features, the last dim "
                   "(nn.LayerNorm(d_model))."),
        edits=(
            (
                "        return x + self.dropout(sublayer(self.norm(x)))",
                "        mean = x.mean(dim=-2, keepdim=True)\n"
                "        var = x.var(dim=-2, keepdim=True, unbiased=False)\n"
                "        y = (x - mean) / torch.sqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias\n"
                "        return x + self.dropout(sublayer(y))",
            ),
        ),
    ),
    Mistake(
        name="no_residual",
        why="Forgets the residual: returns dropout(sublayer(norm(x))) without adding x.",
        diagnosis="ResidualConnection forgets the residual: return x + dropout(sublayer(norm(x))).",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.dropout(sublayer(self.norm(x)))"),),
    ),
    Mistake(
        name="post_norm",
        why="Post-norm: returns norm(x + dropout(sublayer(x))) instead of x + dropout(sublayer(norm(x))).",
        diagnosis="ResidualConnection is post-norm: normalise the sublayer's input, x + dropout(sublayer(norm(x))).",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.norm(x + self.dropout(sublayer(x)))"),),
    ),
    Mistake(
        name="relu_missing",
        why="The feed-forward has no relu between w1 and w2, so it is one linear map.",
        diagnosis="FeedForward has no relu between w1 and w2: use w2(dropout(relu(w1(x)))).",
        edits=(("self.dropout(torch.relu(self.w1(x)))", "self.dropout(self.w1(x))"),),
    ),
)
