# The limiter's DynamoDB table and the usage aggregator Lambda (cmd/aggregator),
# with its stream trigger and a least-privilege role.
#
#   GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./cmd/aggregator
#   zip aggregator.zip bootstrap
#   terraform -chdir=deploy/terraform init && terraform -chdir=deploy/terraform apply -var package=../../aggregator.zip
#
# The table matches what dynamo.CreateTable creates (deploy/deploy_test.go
# checks it), plus point-in-time recovery and deletion protection.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
}

resource "aws_dynamodb_table" "rate_limits" {
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "PK"
  range_key    = "SK"

  attribute {
    name = "PK"
    type = "S"
  }
  attribute {
    name = "SK"
    type = "S"
  }
  attribute {
    name = "GSI2PK"
    type = "S"
  }
  attribute {
    name = "GSI2SK"
    type = "S"
  }
  attribute {
    name = "GSI3PK"
    type = "S"
  }
  attribute {
    name = "GSI3SK"
    type = "S"
  }

  # Keys only: an index that projected token attributes would be written on
  # every acquire (docs/dynamodb.md).
  global_secondary_index {
    name            = "GSI2"
    hash_key        = "GSI2PK"
    range_key       = "GSI2SK"
    projection_type = "KEYS_ONLY"
  }
  global_secondary_index {
    name            = "GSI3"
    hash_key        = "GSI3PK"
    range_key       = "GSI3SK"
    projection_type = "KEYS_ONLY"
  }

  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

  ttl {
    attribute_name = "ttl"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  deletion_protection_enabled = true
}

resource "aws_cloudwatch_log_group" "aggregator" {
  name              = "/aws/lambda/${var.table_name}-aggregator"
  retention_in_days = var.log_retention_days
}

resource "aws_iam_role" "aggregator" {
  name = "${var.table_name}-aggregator"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "lambda.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
}

resource "aws_iam_role_policy" "aggregator" {
  name = "limiter-aggregator"
  role = aws_iam_role.aggregator.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ReadTheStream"
        Effect   = "Allow"
        Action   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
        Resource = "${aws_dynamodb_table.rate_limits.arn}/stream/*"
      },
      {
        Sid      = "SnapshotsDoublingPropagation"
        Effect   = "Allow"
        Action   = "dynamodb:UpdateItem"
        Resource = aws_dynamodb_table.rate_limits.arn
      },
      {
        Sid      = "FindShards"
        Effect   = "Allow"
        Action   = "dynamodb:Query"
        Resource = "${aws_dynamodb_table.rate_limits.arn}/index/GSI3"
      },
      {
        Sid      = "Logs"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "${aws_cloudwatch_log_group.aggregator.arn}:*"
      },
    ]
  })
}

resource "aws_lambda_function" "aggregator" {
  function_name    = "${var.table_name}-aggregator"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  handler          = "bootstrap"
  filename         = var.package
  source_code_hash = filebase64sha256(var.package)
  memory_size      = 256
  timeout          = 60
  role             = aws_iam_role.aggregator.arn
  environment {
    variables = {
      AGGREGATOR_TABLE   = aws_dynamodb_table.rate_limits.name
      AGGREGATOR_WINDOWS = var.aggregator_windows
    }
  }
  depends_on = [aws_cloudwatch_log_group.aggregator]
}

resource "aws_lambda_event_source_mapping" "aggregator" {
  event_source_arn                   = aws_dynamodb_table.rate_limits.stream_arn
  function_name                      = aws_lambda_function.aggregator.arn
  starting_position                  = "TRIM_HORIZON"
  batch_size                         = 1000
  maximum_batching_window_in_seconds = 1
  function_response_types            = ["ReportBatchItemFailures"]
  maximum_retry_attempts             = -1
  # Bucket items only: entity, limits, usage and audit items never invoke
  # the function.
  filter_criteria {
    filter {
      pattern = jsonencode({ dynamodb = { Keys = { SK = { S = ["#STATE"] } } } })
    }
  }
}

# The data plane's policy, one per namespace in var.namespaces: what a
# service that acquires with limiter.WithNamespace(ns) needs, confined to
# that namespace's items by the dynamodb:LeadingKeys condition. Every
# partition key of a namespace, in the table and in its indexes, begins
# with "{ns}/" (deploy/deploy_test.go checks the key layout against the
# condition). The table's one item outside every namespace, the schema
# version (#SCHEMA), is read by every limiter and written by the first.
resource "aws_iam_policy" "namespace" {
  for_each    = toset(var.namespaces)
  name        = "${var.table_name}-${each.key}-data-plane"
  description = "limiter data plane, namespace ${each.key} of table ${var.table_name}"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "NamespaceItems"
        Effect    = "Allow"
        Action    = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
        Resource  = aws_dynamodb_table.rate_limits.arn
        Condition = { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["${each.key}/*", "#SCHEMA"] } }
      },
      {
        Sid       = "NamespaceShards"
        Effect    = "Allow"
        Action    = "dynamodb:Query"
        Resource  = "${aws_dynamodb_table.rate_limits.arn}/index/GSI3"
        Condition = { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["${each.key}/*"] } }
      },
    ]
  })
}
