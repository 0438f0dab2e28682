"""Realistic mistakes in sublayers.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="gelu_instead_of_relu",
        why="Uses GELU between the two layers where the contract asks for ReLU.",
        edits=(("torch.relu(self.w1(x))", "nn.functional.gelu(self.w1(x))"),),
    ),
    EditedVersion(
        name="dropout_over_the_sum",
        why="Applies dropout to the residual sum, so the identity path is dropped too.",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.dropout(x + sublayer(self.norm(x)))"),),
    ),
    EditedVersion(
        name="residual_added_in_place",
        why="Adds x onto the sublayer's output in place (out += x), which autograd needs when the sublayer is tanh.",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))",
                "out = self.dropout(sublayer(self.norm(x)))\n        out += x\n        return out"),),
    ),
    EditedVersion(
        name="norm_of_the_sublayer_only",
        why="Returns norm(sublayer(x)): no residual, and the norm after; never to be told it is post-norm.",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.norm(self.dropout(sublayer(x)))"),),
    ),
    EditedVersion(
        name="x_updated_in_place",
        why="Adds the sublayer's output onto x in place (x += ...), changing the caller's tensor.",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))",
                "x += self.dropout(sublayer(self.norm(x)))\n        return x"),),
    ),
)
